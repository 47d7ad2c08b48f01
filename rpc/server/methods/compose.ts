/**
 * `compose.load|up|plan|down` (shared/spec/isb-rpc.md §5.8): one strict params struct for
 * all four, as in isb (each method accepts every field). Every call reloads the files;
 * `load` needs no Incus, `plan` sends no events.
 *
 * @module
 */

import * as z from "zod";
import type { ComposeParams as EngineParams, Engine } from "../../sandbox/mod.ts";
import { type Handler, method } from "../dispatch.ts";
import { callOptions } from "./sandbox.ts";

const ComposeParams = z.strictObject({
  files: z.array(z.string()).optional(),
  env_files: z.array(z.string()).optional(),
  project_name: z.string().optional(),
  vars: z.record(z.string(), z.string()).optional(),
  services: z.array(z.string()).optional(),
  wait_ready: z.boolean().optional(),
  prune_devices: z.boolean().optional(),
  volumes: z.boolean().optional(),
  project: z.string().optional(),
});

function params(p: z.infer<typeof ComposeParams>): EngineParams {
  const { project: _project, ...rest } = p;
  return rest;
}

/** The compose group's handlers. */
export const composeMethods: Record<string, Handler<Engine>> = {
  "compose.load": method(ComposeParams, (p, ctx) => ctx.engine.composeLoad(params(p))),
  "compose.up": method(
    ComposeParams,
    (p, ctx) => ctx.engine.composeUp(params(p), callOptions(p, ctx)),
  ),
  "compose.plan": method(
    ComposeParams,
    (p, ctx) => ctx.engine.composePlan(params(p), { project: p.project }),
  ),
  "compose.down": method(
    ComposeParams,
    (p, ctx) => ctx.engine.composeDown(params(p), callOptions(p, ctx)),
  ),
};
