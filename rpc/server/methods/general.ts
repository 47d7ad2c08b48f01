/**
 * `version` and `schema` (shared/spec/isb-rpc.md §5.1): the two methods that need no Incus.
 * Both ignore their params entirely, as the original does, and are answered without the engine
 * (the spec: they need no Incus), so a client gets them while the library is still loading.
 *
 * @module
 */

import { PROTOCOL, VERSION } from "../../version.ts";
import { engineFree, type Handler } from "../dispatch.ts";

/** The general group's handlers. */
export const generalMethods: Record<string, Handler> = {
  // Deep-equals the hello line (the TS SDK's unit test checks exactly that).
  version: engineFree(() => Promise.resolve({ isb: VERSION, protocol: PROTOCOL })),
  // The compose file's JSON Schema: root `ComposeFile`, `SandboxSpec` under `$defs`.
  // the spec's schemas, imported on this first use (sandbox_spec.ts's note)
  schema: engineFree(async () => (await import("../../sandbox/spec/spec.ts")).specJsonSchema()),
};
