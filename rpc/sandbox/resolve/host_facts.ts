/**
 * Gathering {@link HostFacts} (the I/O side of resolution), once per call.
 *
 * The Incus round trips come first (`GET /1.0/storage-pools?recursion=1`, `GET /1.0`), so
 * a dead incusd answers `connect` before any semantic check runs (isb-rpc.md §5.2: syntax →
 * host facts → semantics; a spec with a missing relative bind path still yields `connect`
 * without incusd). Then the local files: `/etc/subuid`, `/etc/subgid` (missing = no range)
 * and `/etc/workspace/guest-home`; and `realPath` for bind sources, synchronous because
 * resolution is pure and synchronous.
 *
 * @module
 */

import type { IncusClient, ServerInfo } from "../../incus/mod.ts";
import type { HostFacts } from "./host.ts";

export type { HostFacts };

/** What the host side contributes besides Incus: the server's environment and ids. */
export interface LocalFacts {
  /** The server's environment (HOME, ISB_HOST_PATH_MAP, ISB_BIND_CALLER_OWNED). */
  env: Readonly<Record<string, string>>;
  /** The server's uid/gid; read from Deno when absent. */
  uid?: number;
  gid?: number;
  /** `GET /1.0`, possibly cached (see {@link cachedServerInfo}); asked directly when absent. */
  serverInfo?: (incus: IncusClient) => Promise<ServerInfo>;
}

/**
 * `GET /1.0` remembered for `ttlMs`: extensions, driver and version only change when the
 * daemon is replaced, and the call can take seconds on a busy daemon. The storage-pool
 * call of every gathering still reaches incusd, so a dead daemon is still `connect`.
 */
export function cachedServerInfo(
  now: () => number,
  ttlMs = 60_000,
): (incus: IncusClient) => Promise<ServerInfo> {
  let hit: { at: number; info: ServerInfo } | undefined;
  return async (incus) => {
    if (hit && now() - hit.at < ttlMs) return hit.info;
    const info = await incus.serverInfo();
    hit = { at: now(), info };
    return info;
  };
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch {
    return undefined; // missing or not ours to read: as if absent
  }
}

/** Canonical path of an existing path (symlinks resolved); undefined when missing. */
export function realPathOrUndefined(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
      return undefined;
    }
    throw e;
  }
}

function id(f: () => number | null, fallback: number): number {
  try {
    return f() ?? fallback;
  } catch {
    return fallback;
  }
}

/** Asks Incus (first: `connect` errors come from here), then reads the local facts. */
export async function gatherHostFacts(incus: IncusClient, local: LocalFacts): Promise<HostFacts> {
  const pools = await incus.listStoragePools();
  const info = await (local.serverInfo ?? ((c: IncusClient) => c.serverInfo()))(incus);
  const env = local.env;
  const [subuid, subgid, guestHome] = await Promise.all([
    readOptional("/etc/subuid"),
    readOptional("/etc/subgid"),
    readOptional("/etc/workspace/guest-home"),
  ]);
  const facts: HostFacts = {
    pools: pools.map((p) => ({ name: p.name, driver: p.driver ?? "" })),
    apiExtensions: info.api_extensions ?? [],
    serverDriver: info.environment?.driver ?? "",
    home: env.HOME ?? "",
    uid: local.uid ?? id(() => Deno.uid(), 0),
    gid: local.gid ?? id(() => Deno.gid(), 0),
    subuid,
    subgid,
    hostPathMap: env.ISB_HOST_PATH_MAP || undefined,
    realPath: realPathOrUndefined,
  };
  if (info.environment?.server_version) facts.serverVersion = info.environment.server_version;
  if (env.ISB_BIND_CALLER_OWNED === "1") facts.callerOwned = true;
  if (guestHome !== undefined) facts.guestHome = guestHome;
  return facts;
}

/** The pool names only (volume methods need no more). */
export async function poolFacts(incus: IncusClient): Promise<string[]> {
  return (await incus.listStoragePools()).map((p) => p.name);
}
