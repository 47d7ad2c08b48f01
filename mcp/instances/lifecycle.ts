/**
 * Starting, stopping and destroying isx instances. A start through isx always stamps a
 * fresh instance secret's hash first and delivers the secret once the guest is up, so the
 * proxy never accepts the secret of an earlier boot. Only instances isx made (stamped) are
 * stopped or destroyed unless the caller forces it.
 *
 * @module
 */

import { type IncusClient, type Instance, IsbError, isNotFound } from "../../rpc/base.ts";
import { startLong, stopReliably, waitForIpv4 } from "../host/waits.ts";
import { leaseFile, watchLease } from "../host/leases.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { agentGid, beginSecretDir, finishSecret, restampSecret } from "./secret.ts";
import { grantOf } from "./caller_grant.ts";
import { reconcileMcpClients } from "./mcp_client_reg.ts";

async function getOwned(client: IncusClient, name: string, force: boolean): Promise<Instance> {
  let inst: Instance;
  try {
    inst = (await client.getInstance(name)).value;
  } catch (e) {
    if (isNotFound(e)) throw new IsbError("not_found", `find instance "${name}": no such instance`);
    throw e;
  }
  if (!force && readStamps(inst.config)[STAMP.type] === undefined) {
    throw new IsbError(
      "forbidden",
      `instance "${name}" was not made by isx: refusing to touch it (use --force to override)`,
    );
  }
  return inst;
}

/** Options of {@link startIsxInstance}. */
export interface StartOptions {
  /** Act on instances isx did not make. */
  force?: boolean;
  /** Wait for an IPv4 address (default: yes unless the instance is airgapped). */
  waitForAddress?: boolean;
  /**
   * Work on the started instance that needs neither its secret nor its address (the CLI's CA
   * check), given the instance as read before the start: run while the address is awaited
   * (on a running instance, at once).
   */
  alongside?: (inst: Instance) => Promise<unknown>;
}

/** Starts an instance with a fresh secret; returns its address when waited for. */
export async function startIsxInstance(
  client: IncusClient,
  name: string,
  opts: StartOptions = {},
): Promise<{ ip?: string; alreadyRunning: boolean }> {
  const inst = await getOwned(client, name, opts.force ?? false);
  const stamps = readStamps(inst.config);
  const wantIp = opts.waitForAddress ?? stamps[STAMP.network] !== "airgap";
  if (inst.status === "Running") {
    const [ip] = await Promise.all([
      wantIp ? waitForIpv4(client, name) : undefined,
      opts.alongside?.(inst),
    ]);
    return { ...(ip ? { ip } : {}), alreadyRunning: true };
  }
  if (stamps[STAMP.type] === "base") {
    throw new IsbError(
      "invalid",
      `start "${name}": it is a template; templates stay stopped (isx branch <name> --from ${name})`,
    );
  }
  // agentuser's gid read while the new secret's hash is stamped (the instance is stopped)
  const [secret, gid] = await Promise.all([
    restampSecret(client, name),
    agentGid(client, name).catch(() => undefined),
  ]);
  // the guest's lease on its bridge says when to read its address (mcp/host/leases.ts)
  const nic = inst.expanded_devices?.eth0 ?? inst.devices.eth0;
  const lease = wantIp && nic?.type === "nic" && nic.network
    ? watchLease(leaseFile(client.where, nic.network), {
      name,
      ...(nic["ipv4.address"] ? { address: nic["ipv4.address"] } : {}),
    })
    : undefined;
  await startLong(client, name, `start ${name}`);
  const along = opts.alongside?.(inst);
  along?.catch(() => {}); // awaited below
  // the directory begun beside the boot, the secret once the address is up, as a branch's
  // (mcp/instances/branch.ts says why)
  const read = Promise.resolve(gid);
  const early = wantIp ? beginSecretDir(client, name, read) : undefined;
  const ip = wantIp ? await waitForIpv4(client, name, { lease }) : undefined;
  await finishSecret(client, name, secret, { early, gid: read });
  await along;
  // on every start of a coordinator its agents are registered again (issue 20)
  if (grantOf(stamps)) await reconcileMcpClients(client, name, true);
  return { ...(ip ? { ip } : {}), alreadyRunning: false };
}

/** Stops an instance cleanly (then forcibly after `timeoutSecs`). */
export async function stopIsxInstance(
  client: IncusClient,
  name: string,
  opts: { force?: boolean; timeoutSecs?: number } = {},
): Promise<boolean> {
  const inst = await getOwned(client, name, opts.force ?? false);
  if (inst.status === "Stopped") return false;
  await stopReliably(client, name, { timeoutSecs: opts.timeoutSecs ?? 15 });
  return true;
}

/** Destroys an instance (stopping it first). */
export async function destroyIsxInstance(
  client: IncusClient,
  name: string,
  opts: { force?: boolean } = {},
): Promise<void> {
  const inst = await getOwned(client, name, opts.force ?? false);
  if (inst.status !== "Stopped") {
    await client.stopInstance(name, { step: `stop ${name}`, force: true });
  }
  await client.deleteInstance(name, { step: `delete ${name}` });
}
