/**
 * The Incus client options of an invocation, from what `cli/incus_remote.ts` resolved (or
 * the socket of the global flags). Apart from incus_remote.ts because `isb rpc` needs it
 * before the library is loaded (it loads while the client reads the hello line).
 *
 * @module
 */

import type { IncusClientOptions } from "../rpc/mod.ts";
import type { CliContext } from "./command.ts";

/** The client options of this invocation's Incus: socket or remote, plus the target. */
export function incusOptions(ctx: CliContext): IncusClientOptions {
  const place = ctx.incus ??
    { socket: ctx.global.socket, ...(ctx.global.target ? { target: ctx.global.target } : {}) };
  return { ...place };
}
