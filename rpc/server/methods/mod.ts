/**
 * Every method of the protocol (the 29 of shared/spec/isb-rpc.md §17.6): the handler tables
 * of the method groups, merged. The server imports this module after its hello line
 * (`rpc/server/mod.ts`): building the tables builds every params schema, which is most of
 * what `isb rpc` loads, so a client gets its hello without waiting for it.
 *
 * @module
 */

import type { Handler } from "../dispatch.ts";
import { composeMethods } from "./compose.ts";
import { execMethods } from "./exec.ts";
import { generalMethods } from "./general.ts";
import { sandboxMethods } from "./sandbox.ts";
import { volumeMethods } from "./volume.ts";

/** Every method of the protocol: the group tables merged. */
// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
export const METHODS: Readonly<Record<string, Handler<any>>> = Object.freeze({
  ...generalMethods,
  ...sandboxMethods,
  ...execMethods,
  ...volumeMethods,
  ...composeMethods,
});
