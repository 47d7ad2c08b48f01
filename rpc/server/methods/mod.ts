/**
 * Every method of the protocol (the 29 of shared/spec/isb-rpc.md §17.6): the handler tables
 * of the method groups, merged. The server imports this module after its hello line
 * (`rpc/server/mod.ts`): building the tables builds their params schemas, so a client gets
 * its hello without waiting for it. The spec's schemas, the most of them, are built only by
 * the methods that read a spec ({@link SPEC_METHODS}), on the first call of one.
 *
 * @module
 */

import type { Handler } from "../dispatch.ts";
import { composeMethods } from "./compose.ts";
import { execMethods } from "./exec.ts";
import { generalMethods } from "./general.ts";
import { sandboxMethods } from "./sandbox.ts";
import { volumeMethods } from "./volume.ts";

/**
 * The methods whose params hold a spec (`sandbox_spec.ts`): their handlers are loaded with
 * the spec's schemas on the first call of any of them, so the other methods answer without
 * building those (rpc/server/mod_test.ts checks this list against the module's table).
 */
export const SPEC_METHODS: readonly string[] = [
  "sandbox.create",
  "sandbox.ensure",
  "sandbox.plan",
  "sandbox.resolve",
  "sandbox.wait_ready",
  "sandbox.add_port",
];

// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
let specGroup: Promise<Record<string, Handler<any>>> | undefined;

/** A handler that loads the spec group on its first call, then runs `name`'s handler. */
// deno-lint-ignore no-explicit-any -- as above
function onFirstCall(name: string): Handler<any> {
  return async (raw, ctx) => {
    specGroup ??= import("./sandbox_spec.ts").then((m) => m.sandboxSpecMethods);
    return (await specGroup)[name]!(raw, ctx);
  };
}

/** Every method of the protocol: the group tables merged. */
// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
export const METHODS: Readonly<Record<string, Handler<any>>> = Object.freeze({
  ...generalMethods,
  ...sandboxMethods,
  ...Object.fromEntries(SPEC_METHODS.map((m) => [m, onFirstCall(m)])),
  ...execMethods,
  ...volumeMethods,
  ...composeMethods,
});
