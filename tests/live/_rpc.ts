/**
 * Shared by the live rpc tests of sandboxes, compose and egress: a real engine on the real
 * Incus (the socket, or the remote of ISX_TEST_INCUS_REMOTE: helpers/live.ts), with its lock and state directories in a temp dir, and `call(method,
 * params)`, which runs a method's handler in-process exactly as the server would (params
 * parsed strictly, errors through `toWire`) and collects its events.
 *
 * @module
 */

import type { IncusClient } from "../../rpc/mod.ts";
import { createEngine, type Engine } from "../../rpc/sandbox/mod.ts";
import { type CallContext, toWire, type WireError } from "../../rpc/server/dispatch.ts";
import { composeMethods } from "../../rpc/server/methods/compose.ts";
import { sandboxMethods } from "../../rpc/server/methods/sandbox.ts";
import { sandboxSpecMethods } from "../../rpc/server/methods/sandbox_spec.ts";
import { volumeMethods } from "../../rpc/server/methods/volume.ts";
import { liveIncus } from "../helpers/live.ts";

/** The handlers this area owns. */
export const METHODS = {
  ...sandboxMethods,
  ...sandboxSpecMethods,
  ...volumeMethods,
  ...composeMethods,
};

/** What one call produced. */
export interface Outcome {
  result?: unknown;
  error?: WireError;
  events: { event: string; data: unknown }[];
}

/** A live engine and its scratch directories. */
export interface LiveRig extends AsyncDisposable {
  engine: Engine;
  incus: IncusClient;
  dir: string;
  call(method: string, params: unknown): Promise<Outcome>;
  /** Like `call`, but throws on an error reply; returns the result. */
  ok(method: string, params: unknown): Promise<unknown>;
}

/** Builds a rig; `env` is the server environment the engine sees. */
export async function liveRig(
  opts: { env?: Record<string, string>; cwd?: string } = {},
): Promise<LiveRig> {
  const dir = await Deno.makeTempDir({ prefix: "isb-live-" });
  const incus = liveIncus();
  const engine = createEngine({
    incus,
    cwd: opts.cwd ?? dir,
    env: { HOME: Deno.env.get("HOME") ?? "/root", ...opts.env },
    lockDir: `${dir}/lock`,
    isbStateDir: `${dir}/state`,
  });
  async function call(method: string, params: unknown): Promise<Outcome> {
    const events: Outcome["events"] = [];
    const handler =
      (METHODS as Record<string, (raw: unknown, ctx: CallContext<Engine>) => Promise<unknown>>)[
        method
      ];
    if (!handler) throw new TypeError(`no handler ${method}`);
    const ctx: CallContext<Engine> = {
      id: 1,
      key: "1",
      emit: (event, data) => void events.push({ event, data }),
      engine,
    };
    try {
      return { result: await handler(params, ctx), events };
    } catch (e) {
      return { error: toWire(e), events };
    }
  }
  return {
    engine,
    incus,
    dir,
    call,
    async ok(method, params) {
      const r = await call(method, params);
      if (r.error) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
      return r.result;
    },
    async [Symbol.asyncDispose]() {
      incus.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Force-removes instances by name, ignoring any that are gone. */
export async function cleanup(rig: LiveRig, ...names: string[]): Promise<void> {
  for (const name of names) {
    await rig.engine.remove({ name, force: true }).catch(() => {});
  }
}

/** The progress lines of an outcome. */
export function progressOf(o: Outcome): string[] {
  return o.events.filter((e) => e.event === "progress").map((e) => String(e.data));
}
