/**
 * `sandbox.get|list|remove|start|stop|restart|remove_device` (shared/spec/isb-rpc.md §5.2,
 * §5.3): strict params (an unknown field is `invalid` naming it; every method takes an
 * optional `project`), forwarded to the engine; `progress` lines become `progress` events.
 * The methods that read a spec or part of one (`create|ensure|plan|resolve|wait_ready|
 * add_port`) are `sandbox_spec.ts`'s, loaded on their first call; `sandbox.exec` lives in
 * `exec.ts`.
 *
 * @module
 */

import * as z from "zod";
import { parseDuration } from "../../duration.ts";
import type { CallOptions, Engine } from "../../sandbox/mod.ts";
import { type CallContext, type Handler, method, once } from "../dispatch.ts";

// Each schema is built on its method's first call (`method` takes a builder): the first
// sandbox.list builds its own, not the group's seven.

/** A duration param: a string (`"90s"`, `"1500ms"`, `"30"`) or, as an extension, seconds. */
export const durationParam = once(() =>
  z.union([z.string(), z.number()]).transform((s, ctx) => {
    try {
      return parseDuration(s);
    } catch (e) {
      ctx.addIssue({ code: "custom", message: (e as Error).message });
      return z.NEVER;
    }
  })
);

/** Every method's optional `project`. */
export const project = once(() => z.string().optional());

const nameParams = once(() => z.strictObject({ name: z.string(), project: project() }));

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

/** The sandbox group's handlers. */
export const sandboxMethods: Record<string, Handler<Engine>> = {
  "sandbox.get": method(nameParams, (p, ctx) => ctx.engine.get(p.name, { project: p.project })),
  "sandbox.list": method(
    () => z.strictObject({ labels: z.array(z.string()).optional(), project: project() }),
    (p, ctx) => ctx.engine.list(p.labels ?? [], { project: p.project }),
  ),
  "sandbox.remove": method(
    () => z.strictObject({ name: z.string(), force: z.boolean().optional(), project: project() }),
    async (p, ctx) => {
      await ctx.engine.remove({ name: p.name, force: p.force ?? false }, callOptions(p, ctx));
      return null;
    },
  ),
  "sandbox.start": method(nameParams, async (p, ctx) => {
    await ctx.engine.start(p.name, callOptions(p, ctx));
    return null;
  }),
  "sandbox.stop": method(
    () =>
      z.strictObject({
        name: z.string(),
        force: z.boolean().optional(),
        timeout: durationParam().optional(),
        project: project(),
      }),
    async (p, ctx) => {
      await ctx.engine.stop(
        { name: p.name, force: p.force ?? false, timeoutMs: p.timeout ?? 30_000 },
        callOptions(p, ctx),
      );
      return null;
    },
  ),
  "sandbox.restart": method(nameParams, async (p, ctx) => {
    await ctx.engine.restart(p.name, callOptions(p, ctx));
    return null;
  }),
  "sandbox.remove_device": method(
    () => z.strictObject({ name: z.string(), device: z.string(), project: project() }),
    (p, ctx) => ctx.engine.removeDevice({ name: p.name, device: p.device }, callOptions(p, ctx)),
  ),
};
