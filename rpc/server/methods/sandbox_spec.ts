/**
 * `sandbox.create|ensure|plan|resolve|wait_ready|add_port` (shared/spec/isb-rpc.md §5.2,
 * §5.3): the sandbox methods whose params hold a spec or part of one. Their schemas are the
 * spec's, most of what `isb rpc` would build at start, so this module is imported on the first
 * call of one of them (`GROUPS` in mod.ts) and the others answer without it
 * (docs/decisions.md, "The spec's schemas only where a spec is read").
 *
 * The whole spec is parsed here, before the engine asks incusd anything, which is the first
 * step of §5.2's order of failure (syntax → host facts → semantics).
 *
 * @module
 */

import * as z from "zod";
import type { CallOptions, Engine } from "../../sandbox/mod.ts";
import {
  ExecDefaultsSchema,
  NamedVolumeSpecSchema,
  PortSchema,
  ReadyCheckSchema,
  SandboxSpecSchema,
} from "../../sandbox/spec/spec.ts";
import { type Handler, method } from "../dispatch.ts";
import { callOptions, durationParam, project } from "./sandbox.ts";

const SpecParams = z.strictObject({
  spec: SandboxSpecSchema,
  base_dir: z.string().optional(),
  volumes: z.record(z.string(), NamedVolumeSpecSchema).optional(),
  wait_ready: z.boolean().optional(),
  prune_devices: z.boolean().optional(),
  project: project(),
});

const spec = <T>(run: (e: Engine, p: z.infer<typeof SpecParams>, o: CallOptions) => Promise<T>) =>
  method<typeof SpecParams, Engine>(
    SpecParams,
    (p, ctx) => run(ctx.engine, p, callOptions(p, ctx)),
  );

/** The handlers of the sandbox methods that read a spec. */
export const sandboxSpecMethods: Record<string, Handler<Engine>> = {
  "sandbox.create": spec((e, p, o) => e.create(p, o)),
  "sandbox.ensure": spec((e, p, o) => e.ensure(p, o)),
  // plan and resolve send no events.
  "sandbox.plan": spec((e, p, o) => e.plan(p, { project: o.project })),
  "sandbox.resolve": spec((e, p, o) => e.resolve(p, { project: o.project })),
  "sandbox.wait_ready": method(
    z.strictObject({
      name: z.string(),
      ready: z.array(ReadyCheckSchema).optional(),
      ready_timeout: durationParam().optional(),
      exec: ExecDefaultsSchema.optional(),
      project: project(),
    }),
    async (p, ctx) => {
      await ctx.engine.waitReady({
        name: p.name,
        ready: p.ready ?? ["running"],
        timeoutMs: p.ready_timeout ?? 60_000,
        exec: p.exec,
      }, callOptions(p, ctx));
      return null;
    },
  ),
  "sandbox.add_port": method(
    z.strictObject({ name: z.string(), port: PortSchema, project: project() }),
    (p, ctx) => ctx.engine.addPort({ name: p.name, port: p.port }, callOptions(p, ctx)),
  ),
};
