/**
 * The per-start instance secret: 256 random bits, new on every start through isx, written
 * to `/run/isx/instance-secret` (root-owned, group agentuser, mode 0440, on the guest's
 * tmpfs so it dies with the boot) and known to the host only as its SHA-256, stamped as
 * `instance-secret-sha256`. The proxy checks `X-Isx-Instance-Secret` against that hash.
 * The value travels to the guest through the files API, never in argv or env, and never
 * prints.
 *
 * @module
 */

import { type IncusClient, IsbError, isNotFound, sha256Hex } from "../../rpc/base.ts";
import { runMounted, waitForRun } from "../host/waits.ts";
import { STAMP, stampKey } from "../host/stamps.ts";
import { AGENT_USER, GUEST_SECRET_PATH } from "../templates/steps.ts";

/** A secret value that prints as its length only. */
export class InstanceSecret {
  readonly #value: string;

  /** Wraps a value (use {@link InstanceSecret.generate} for a new one). */
  constructor(value: string) {
    this.#value = value;
  }

  /** A fresh random secret (64 hex characters). */
  static generate(): InstanceSecret {
    const b = crypto.getRandomValues(new Uint8Array(32));
    return new InstanceSecret([...b].map((x) => x.toString(16).padStart(2, "0")).join(""));
  }

  /** The value, for the one place that writes it into the guest. */
  reveal(): string {
    return this.#value;
  }

  /** Hex SHA-256 of the value: what the host keeps. */
  get sha256(): string {
    return sha256Hex(this.#value);
  }

  /** Redacted. */
  toJSON(): string {
    return `[secret: ${this.#value.length} chars]`;
  }

  /** Redacted. */
  toString(): string {
    return this.toJSON();
  }

  /** Redacted. */
  [Symbol.for("Deno.customInspect")](): string {
    return this.toJSON();
  }
}

/** The config patch that records a secret's hash on an instance. */
export function secretStamp(secret: InstanceSecret): Record<string, string> {
  return { [stampKey(STAMP.secretHash)]: secret.sha256 };
}

/**
 * agentuser's gid in `name`'s `/etc/group` (read through the files API; a stopped container's
 * too, so a branch reads its template's while the copy runs).
 */
export async function agentGid(client: IncusClient, name: string): Promise<number> {
  const group = new TextDecoder().decode((await client.pullFile(name, "/etc/group")).data);
  for (const line of group.split("\n")) {
    const f = line.split(":");
    if (f[0] === AGENT_USER && f[2]) return Number(f[2]);
  }
  throw new IsbError(
    "not_found",
    `write the instance secret of "${name}": it has no ${AGENT_USER} group`,
  );
}

/**
 * Writes the secret into a running guest through the files API (no exec, nothing in any
 * argv or environment), once systemd has mounted /run: `/run/isx` root:agentuser 0750,
 * the secret root:agentuser 0440. With `gid`, the directory was made before
 * ({@link prepareSecretDir}) and only the file is written.
 */
export async function deliverSecret(
  client: IncusClient,
  name: string,
  secret: InstanceSecret,
  o: { gid?: number } = {},
): Promise<void> {
  const gid = o.gid ?? await prepareSecretDir(client, name);
  await client.pushFile(name, GUEST_SECRET_PATH, secret.reveal(), {
    step: "write the instance secret",
    uid: 0,
    gid,
    mode: 0o440,
  });
}

/**
 * Makes `/run/isx` (root:agentuser 0750) once systemd has mounted /run; returns agentuser's
 * gid (read unless given). A warm-pool member gets it when made, so its claim only writes the
 * file.
 */
export async function prepareSecretDir(
  client: IncusClient,
  name: string,
  o: { gid?: number } = {},
): Promise<number> {
  const make = (gid: number) => makeSecretDir(client, name, gid);
  if (o.gid === undefined) {
    const [gid] = await Promise.all([agentGid(client, name), waitForRun(client, name)]);
    await make(gid);
    return gid;
  }
  // With the gid known (a branch reads it during the copy) the check and the directory go
  // together: after the guest's address /run is all but always mounted. Should the check find
  // it not yet mounted, or that early attempt fail (incusd answers 404 while the guest's boot
  // has not set up its filesystem), the directory is made once /run is mounted; one made before
  // is hidden under the mount and holds nothing (the secret is written only after this returns).
  const [mounted, made] = await Promise.all([
    runMounted(client, name),
    make(o.gid).then(() => true, () => false),
  ]);
  if (!mounted || !made) {
    await waitForRun(client, name);
    await make(o.gid);
  }
  return o.gid;
}

/**
 * The secret's directory begun while the guest boots, right after its start: one check of
 * /run, which also starts incusd's file server in the guest (an instance's first files-API
 * call costs ~40 ms, each later one ~10), and, /run already mounted and the gid known,
 * `/run/isx`. Returns the gid once the directory is made, else undefined (the caller makes it
 * with {@link prepareSecretDir} after the address, as before). Never rejects. On a quiet host
 * one call beside the boot did not delay the address; on a loaded one it cost the boot about
 * what it saved after (docs/decisions.md). Polls beside the boot delayed it more.
 */
export async function beginSecretDir(
  client: IncusClient,
  name: string,
  gid: Promise<number | undefined>,
): Promise<number | undefined> {
  try {
    if (!await runMounted(client, name)) return undefined;
    const g = await gid;
    if (g === undefined) return undefined;
    await makeSecretDir(client, name, g);
    return g;
  } catch {
    return undefined;
  }
}

/**
 * The secret's delivery once the guest holds its address: into the directory
 * {@link beginSecretDir} made (`early`), else one {@link prepareSecretDir} makes now. Should
 * the early directory be gone (the guest restarted itself while it booted), it is made again.
 */
export async function finishSecret(
  client: IncusClient,
  name: string,
  secret: InstanceSecret,
  o: { early: Promise<number | undefined> | undefined; gid: Promise<number | undefined> },
): Promise<void> {
  const made = await o.early;
  if (made !== undefined) {
    try {
      return await deliverSecret(client, name, secret, { gid: made });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
  const known = await o.gid;
  const gid = await prepareSecretDir(client, name, known === undefined ? {} : { gid: known });
  await deliverSecret(client, name, secret, { gid });
}

/** `/run/isx`, root:agentuser 0750 (one that exists is kept). */
async function makeSecretDir(client: IncusClient, name: string, gid: number): Promise<void> {
  const dir = GUEST_SECRET_PATH.replace(/\/[^/]*$/, "");
  try {
    await client.mkdir(name, dir, { step: "create /run/isx", uid: 0, gid, mode: 0o750 });
  } catch (e) {
    if (!(e instanceof IsbError && e.code === "already_exists")) throw e;
  }
}

/** Stamps a fresh secret's hash (read-modify-write); returns the secret to deliver. */
export async function restampSecret(client: IncusClient, name: string): Promise<InstanceSecret> {
  const secret = InstanceSecret.generate();
  await client.updateInstance(name, (i) => {
    i.config = { ...i.config, ...secretStamp(secret) };
  }, { step: `stamp the instance secret of ${name}` });
  return secret;
}
