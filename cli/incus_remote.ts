/**
 * Which incusd this invocation talks to: the local unix socket (the default), or the remote
 * `--remote NAME|URL` (env INCUS_REMOTE) names in the incus client's own configuration, with
 * `--target MEMBER` placing new instances on a cluster member. The configuration is read
 * here, before the permission mode is entered (the mode keeps no read of it: the client key
 * is held in memory only), and checked with one `GET /1.0` so an unknown remote, a missing
 * certificate or an untrusted client fails before any work with what to run.
 *
 * @module
 */

import { checkRemote, createIncusClient, IsbError, resolveRemote } from "../rpc/base.ts";
import type { GlobalFlags } from "./args.ts";
export { incusOptions } from "./incus_options.ts";
import type { IncusPlace } from "./command.ts";

/** Resolves `--remote`/`--target` (reads the incus client config at `confDir` for a remote). */
export function resolvePlace(global: GlobalFlags, confDir: string | undefined): IncusPlace {
  const target = global.target ? { target: global.target } : {};
  if (global.remote === undefined) return { socket: global.socket, ...target };
  const endpoint = resolveRemote(global.remote, {
    confDir: confDir ?? `${Deno.env.get("HOME") ?? "/root"}/.config/incus`,
    socket: global.socket,
    read: readText,
  });
  return { ...endpoint, ...target };
}

/** With a remote or a target: one `GET /1.0` that fails early and clearly (see remote.ts). */
export async function preflightPlace(place: IncusPlace, global: GlobalFlags): Promise<void> {
  if (global.remote === undefined && !global.target) return;
  const client = createIncusClient({ ...place, timeouts: { requestMs: 15_000 } });
  try {
    await checkRemote(client, {
      ...(global.remote !== undefined ? { remote: global.remote } : {}),
      ...(global.target ? { target: global.target } : {}),
    });
  } finally {
    client.close();
  }
}

function readText(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new IsbError("io", `read Incus client config ${path}: ${(e as Error).message}`, {
      cause: e,
    });
  }
}
