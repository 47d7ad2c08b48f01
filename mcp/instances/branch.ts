/**
 * `isx branch <name> --from <template>`: a copy-on-write copy of a built template, started,
 * with an address. One copy request carries everything (stamps, the first secret's hash,
 * network devices with the NIC's fixed, filtered address (static_ip.ts), resource limits),
 * so the only calls after it are start, the wait for an address and the secret's delivery.
 * What does not depend on the rest overlaps: agentuser's gid is read from the source while
 * the copy runs, and the caller's work alongside (the CLI's CA check) runs while the address
 * is awaited, with one files-API call that begins the secret's directory. The secret itself is
 * written only once the guest holds its pinned address (after a repin, if the pin was leased),
 * since the proxy names a caller by that address.
 *
 * @module
 */

import { type IncusClient, type Instance, IsbError, isNotFound } from "../../rpc/base.ts";
import { startLong, waitForIpv4 } from "../host/waits.ts";
import { leaseFile, watchLease } from "../host/leases.ts";
import { carriedAccountStamps, copyConfig, readStamps, STAMP, stampKey } from "../host/stamps.ts";
import type { Definitions } from "../templates/load.ts";
import { resolveChain } from "../templates/resolve.ts";
import type { TemplateDef } from "../templates/schema.ts";
import { networkDevices, type NetworkMode, type ProxyPlace } from "./network.ts";
import { retargetGuestProxy } from "./retarget.ts";
import { agentGid, beginSecretDir, finishSecret, InstanceSecret, secretStamp } from "./secret.ts";
import {
  type AddressListing,
  type PinPlan,
  planPin,
  repinLeased,
  startPinned,
} from "./static_ip.ts";
import { grantOf } from "./caller_grant.ts";
import { reconcileMcpClients, type RegistrationReport } from "./mcp_client_reg.ts";

/** Resource limits of an instance. */
export type Limits = NonNullable<TemplateDef["limits"]>;

/** Options of {@link branchInstance}. */
export interface BranchOptions {
  /** The new instance's name. */
  name: string;
  /** The built template to copy. */
  template: string;
  /** Where the proxy is: proxy-only instances reach only it. */
  proxy: ProxyPlace;
  /** Default: the template definition's, else full. */
  network?: NetworkMode;
  /** Default: the template definition's. */
  limits?: Limits;
  /** Extra stamps (prefix-less), e.g. the MCP server's `mcp-*`. */
  stamps?: Record<string, string>;
  /** Account pins by namespace key (`claude: work`), stamped `account.<ns>`. */
  accounts?: Record<string, string>;
  /** Wait for an IPv4 address (default: yes unless airgap). */
  waitForAddress?: boolean;
  /** Copy this stopped isx instance of `template` instead of the template (a fork). */
  from?: string;
  /** The source instance as the caller already read it (not read again). */
  source?: Instance;
  /**
   * Work on the started instance that needs neither its secret nor its address (the CLI's CA
   * check): run while the address is awaited; a failure removes the branch, as a failed start
   * does.
   */
  alongside?: (name: string) => Promise<unknown>;
  /**
   * The address plan's listing, started early by the caller (the CLI: once it read the
   * template, while its definitions load); used when it is of the NIC's network.
   */
  addresses?: Promise<AddressListing | undefined>;
  /** Stamp and deliver an instance secret (default yes; a warm-pool member gets none). */
  secret?: boolean;
}

/** What a branch made. */
export interface BranchResult {
  /** The name. */
  name: string;
  /** The template. */
  template: string;
  /** The network mode. */
  network: NetworkMode;
  /** The working directory. */
  workdir: string;
  /** The IPv4 address, if waited for. */
  ip?: string;
  /** Milliseconds it took. */
  ms: number;
  /** A coordinator's agent registrations, or a copy's removal of them (issue 20). */
  mcpClients?: RegistrationReport;
  /**
   * Milliseconds of each step, in order (`bench/branch_bench.ts` prints them): `source` (read
   * the template), `network` (its devices), `address` (the static address plan), `copy`,
   * `start` (with the address pinned), `ipv4` (the wait for the address), `repin` (when the
   * pin was leased), `secret` (`/run/isx` and the secret, after the address), `alongside
   * (rest)` (what of {@link BranchOptions.alongside} outlasted the rest). Measured, not
   * promised: a step that did not run is absent.
   */
  steps: Record<string, number>;
}

/** The network mode and limits the current definitions give a template (if defined). */
export function branchDefaults(
  defs: Definitions,
  template: string,
): { network?: NetworkMode; limits?: Limits } {
  if (!defs.templates.has(template)) return {};
  const chain = resolveChain(defs, template);
  let network: NetworkMode | undefined;
  let limits: Limits | undefined;
  for (const l of chain) {
    network = l.template.def.network ?? network;
    if (l.template.def.limits) limits = { ...limits, ...l.template.def.limits };
  }
  return { ...(network ? { network } : {}), ...(limits ? { limits } : {}) };
}

/** Incus `limits.*` keys for limits. */
export function limitsConfig(limits: Limits | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (limits?.cpu !== undefined) out["limits.cpu"] = String(limits.cpu);
  if (limits?.memory !== undefined) out["limits.memory"] = limits.memory;
  if (limits?.processes !== undefined) out["limits.processes"] = String(limits.processes);
  return out;
}

/** Copies a built template into a new running instance. */
export async function branchInstance(
  client: IncusClient,
  opts: BranchOptions,
): Promise<BranchResult> {
  const started = Date.now();
  const steps: Record<string, number> = {};
  let lapAt = performance.now();
  const lap = (step: string) => {
    const now = performance.now();
    steps[step] = Math.round((now - lapAt) * 10) / 10;
    lapAt = now;
  };
  const sourceName = opts.from ?? opts.template;
  let tpl;
  try {
    tpl = opts.source ?? (await client.getInstance(sourceName)).value;
    lap("source");
  } catch (e) {
    if (isNotFound(e) && opts.from) {
      throw new IsbError("not_found", `fork "${opts.name}" from "${opts.from}": no such instance`);
    }
    if (isNotFound(e)) {
      throw new IsbError(
        "not_found",
        `branch "${opts.name}" from "${opts.template}": the template is not built: run isx build ${opts.template}`,
      );
    }
    throw e;
  }
  const ts = readStamps(tpl.config);
  if (opts.from && ts[STAMP.type] !== "instance") {
    throw new IsbError(
      "invalid",
      `fork "${opts.name}" from "${opts.from}": it is not an isx instance`,
    );
  }
  if (!opts.from && ts[STAMP.type] !== "base") {
    throw new IsbError(
      "invalid",
      `branch "${opts.name}" from "${opts.template}": it is not a template built by isx build`,
    );
  }
  const network = opts.network ?? "full";
  const workdir = ts[STAMP.workdir] || "/home/agentuser";
  const secret = opts.secret === false ? undefined : InstanceSecret.generate();
  const stamps: Record<string, string> = {
    [STAMP.type]: "instance",
    [STAMP.profile]: opts.template,
    [STAMP.parent]: sourceName,
    [STAMP.workdir]: workdir,
    [STAMP.network]: network,
    // no stamp is no trust: the proxy gives credentials only to trusted instances
    [STAMP.trusted]: ts[STAMP.trusted] === "true" ? "true" : "false",
    [STAMP.buildId]: ts[STAMP.buildId] ?? "",
    ...carriedAccountStamps(ts),
    ...Object.fromEntries(
      Object.entries(opts.accounts ?? {}).map(([ns, name]) => [STAMP.account + ns, name]),
    ),
    ...opts.stamps,
  };
  const net = await networkDevices(client, network, opts.proxy);
  lap("network");
  let pin: PinPlan | undefined;
  if (network !== "airgap") {
    const base = net.devices.eth0 ?? tpl.expanded_devices?.eth0 ?? tpl.devices.eth0 ?? {};
    pin = await planPin(
      client,
      base,
      `branch "${opts.name}" from "${opts.template}"`,
      opts.addresses,
    );
    net.devices.eth0 = pin.nic;
    stamps[STAMP.staticIp] = pin.address;
    lap("address");
  }
  // agentuser's gid, from the source while the copy runs (the copy's /etc/group is the
  // source's; not before: the read's mount would slow the address plan's listing); unread (a
  // VM, say), the started guest's is read
  const gid = secret
    ? agentGid(client, sourceName).catch(() => undefined)
    : Promise.resolve(undefined);
  try {
    await client.createInstance({
      name: opts.name,
      source: { type: "copy", source: sourceName, instance_only: true },
      config: {
        ...copyConfig(tpl.config, stamps),
        ...(secret ? secretStamp(secret) : {}),
        ...limitsConfig(opts.limits),
      },
      devices: net.devices,
      description: `isx instance of ${opts.template}`,
    }, { step: `copy ${opts.template} to ${opts.name}` });
    lap("copy");
  } catch (e) {
    if (e instanceof IsbError && e.code === "already_exists") {
      throw new IsbError(
        "already_exists",
        `branch "${opts.name}": an instance of that name exists`,
      );
    }
    throw e;
  }
  const wantIp = opts.waitForAddress ?? network !== "airgap";
  let ip: string | undefined;
  try {
    // built on the default bridge: its proxy settings name that gateway, not this one's
    if (net.gateway) await retargetGuestProxy(client, opts.name, net.gateway);
    const start = () => startLong(client, opts.name, `start ${opts.name}`);
    const pinned = pin && {
      name: opts.name,
      device: "eth0",
      network: pin.network,
      address: pin.address,
      stampKey: stampKey(STAMP.staticIp),
      start,
    };
    // the lease file's lines before the start are not this guest's lease (./host/leases.ts)
    const lease = wantIp && pin
      ? watchLease(leaseFile(client.where, pin.network), { name: opts.name, address: pin.address })
      : undefined;
    if (pinned) pinned.address = await startPinned(client, pinned);
    else await start();
    lap("start");
    // the CA check needs the started instance, not its address or secret: it runs alongside
    const along = opts.alongside?.(opts.name);
    along?.catch(() => {}); // awaited below; a failure meanwhile is not an unhandled one
    // one files-API call beside the boot: incusd's file server in the guest up, and /run/isx
    // made if /run is mounted yet (polls beside the boot delayed the address; docs/decisions.md).
    // Only while an address is awaited: without that wait the guest is barely started, and a
    // directory made this early could be refused the file (HTTP 404 seen in CI, airgapped)
    let early = secret && wantIp ? beginSecretDir(client, opts.name, gid) : undefined;
    ip = wantIp ? await waitForIpv4(client, opts.name, { lease }) : undefined;
    lap("ipv4");
    if (pinned && ip && ip !== pinned.address) {
      // the pin was leased to another client at start: move it and restart, before any
      // secret (and after the work alongside, which the restart would cut short); the
      // restart empties /run, so the directory is made again
      await along;
      await early;
      early = undefined;
      ({ address: ip } = await repinLeased(client, pinned, ip));
      lap("repin");
    }
    // the secret itself only once the guest holds its pinned address (the proxy names a
    // caller by it)
    if (secret) {
      await finishSecret(client, opts.name, secret, { early, gid });
      lap("secret");
    }
    if (along) {
      await along;
      lap("alongside (rest)");
    }
  } catch (e) {
    // a branch that cannot start is useless: remove it rather than leave a half-made one
    // (registering a coordinator's agents below never throws: the next start tries again)
    await client.stopInstance(opts.name, { step: `stop ${opts.name}`, force: true }).catch(
      () => {},
    );
    await client.deleteInstance(opts.name, { step: `delete ${opts.name}` }).catch(() => {});
    throw e;
  }
  // a coordinator's agents learn the endpoint; a copy of one (a fork) loses it on this start
  const coordinator = grantOf(stamps) !== undefined;
  const mcpClients = coordinator || opts.from
    ? await reconcileMcpClients(client, opts.name, coordinator)
    : undefined;
  return {
    name: opts.name,
    template: opts.template,
    network,
    workdir,
    ...(ip ? { ip } : {}),
    ms: Date.now() - started,
    ...(mcpClients ? { mcpClients } : {}),
    steps,
  };
}
