/**
 * `sandbox.create|ensure|plan|resolve|get|list|remove|start|stop|restart|wait_ready|
 * add_port|remove_device` (shared/spec/isb-rpc.md §5.2, §5.3): strict params (an unknown
 * field is `invalid` naming it; every method takes an optional `project`), forwarded to the
 * engine; `progress` lines become `progress` events. `sandbox.exec` lives in `exec.ts`.
 *
 * The whole spec is parsed here, before the engine asks incusd anything, which is the first
 * step of §5.2's order of failure (syntax → host facts → semantics).
 *
 * @module
 */

import { z } from "zod";
import { parseDuration } from "../../duration.ts";
import type { CallOptions, Engine } from "../../sandbox/mod.ts";
import {
  ExecDefaultsSchema,
  NamedVolumeSpecSchema,
  PortSchema,
  ReadyCheckSchema,
  SandboxSpecSchema,
} from "../../sandbox/spec/spec.ts";
import { type CallContext, type Handler, method } from "../dispatch.ts";

/** A duration param: a string (`"90s"`, `"1500ms"`, `"30"`) or, as an extension, seconds. */
export const DurationParam = z.union([z.string(), z.number()]).transform((s, ctx) => {
  try {
    return parseDuration(s);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});

const project = z.string().optional();

const SpecParams = z.strictObject({
  spec: SandboxSpecSchema,
  base_dir: z.string().optional(),
  volumes: z.record(z.string(), NamedVolumeSpecSchema).optional(),
  wait_ready: z.boolean().optional(),
  prune_devices: z.boolean().optional(),
  project,
});

const NameParams = z.strictObject({ name: z.string(), project });

/** The per-call options of a request: its project and its progress events. */
export function callOptions(
  p: { project?: string | undefined },
  ctx: CallContext<Engine>,
): CallOptions {
  return {
    project: p.project,
    progress: (line: string) => void ctx.emit("progress", line),
  };
}

const spec = <T>(run: (e: Engine, p: z.infer<typeof SpecParams>, o: CallOptions) => Promise<T>) =>
  method<typeof SpecParams, Engine>(
    SpecParams,
    (p, ctx) => run(ctx.engine, p, callOptions(p, ctx)),
  );

/** The sandbox group's handlers. */
export const sandboxMethods: Record<string, Handler<Engine>> = {
  "sandbox.create": spec((e, p, o) => e.create(p, o)),
  "sandbox.ensure": spec((e, p, o) => e.ensure(p, o)),
  // plan and resolve send no events.
  "sandbox.plan": spec((e, p, o) => e.plan(p, { project: o.project })),
  "sandbox.resolve": spec((e, p, o) => e.resolve(p, { project: o.project })),
  "sandbox.get": method(NameParams, (p, ctx) => ctx.engine.get(p.name, { project: p.project })),
  "sandbox.list": method(
    z.strictObject({ labels: z.array(z.string()).optional(), project }),
    (p, ctx) => ctx.engine.list(p.labels ?? [], { project: p.project }),
  ),
  "sandbox.remove": method(
    z.strictObject({ name: z.string(), force: z.boolean().optional(), project }),
    async (p, ctx) => {
      await ctx.engine.remove({ name: p.name, force: p.force ?? false }, callOptions(p, ctx));
      return null;
    },
  ),
  "sandbox.start": method(NameParams, async (p, ctx) => {
    await ctx.engine.start(p.name, callOptions(p, ctx));
    return null;
  }),
  "sandbox.stop": method(
    z.strictObject({
      name: z.string(),
      force: z.boolean().optional(),
      timeout: DurationParam.optional(),
      project,
    }),
    async (p, ctx) => {
      await ctx.engine.stop(
        { name: p.name, force: p.force ?? false, timeoutMs: p.timeout ?? 30_000 },
        callOptions(p, ctx),
      );
      return null;
    },
  ),
  "sandbox.restart": method(NameParams, async (p, ctx) => {
    await ctx.engine.restart(p.name, callOptions(p, ctx));
    return null;
  }),
  "sandbox.wait_ready": method(
    z.strictObject({
      name: z.string(),
      ready: z.array(ReadyCheckSchema).optional(),
      ready_timeout: DurationParam.optional(),
      exec: ExecDefaultsSchema.optional(),
      project,
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
    z.strictObject({ name: z.string(), port: PortSchema, project }),
    (p, ctx) => ctx.engine.addPort({ name: p.name, port: p.port }, callOptions(p, ctx)),
  ),
  "sandbox.remove_device": method(
    z.strictObject({ name: z.string(), device: z.string(), project }),
    (p, ctx) => ctx.engine.removeDevice({ name: p.name, device: p.device }, callOptions(p, ctx)),
  ),
};
