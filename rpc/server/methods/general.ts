/**
 * `version` and `schema` (shared/spec/isb-rpc.md §5.1): the two methods that need no Incus.
 * Both ignore their params entirely, as the original does.
 *
 * @module
 */

import { PROTOCOL, VERSION } from "../../version.ts";
import type { Handler } from "../dispatch.ts";

/** The general group's handlers. */
export const generalMethods: Record<string, Handler> = {
  // Deep-equals the hello line (the TS SDK's unit test checks exactly that).
  version: () => Promise.resolve({ isb: VERSION, protocol: PROTOCOL }),
  // The compose file's JSON Schema: root `ComposeFile`, `SandboxSpec` under `$defs`.
  // the spec's schemas, imported on this first use (sandbox_spec.ts's note)
  schema: async () => (await import("../../sandbox/spec/spec.ts")).specJsonSchema(),
};
