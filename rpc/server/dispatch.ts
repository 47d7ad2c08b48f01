/**
 * THE error edge of `isb rpc` and the shape of a method handler.
 *
 * Every method module exports a `Record<string, Handler>` built with {@link method}, which
 * parses params with a strict zod schema before the handler runs (so handlers see typed
 * values, never raw JSON), and {@link toWire} turns anything thrown into the wire's
 * `{code, message, data?}` exactly once (isb's `error_json`).
 *
 * @module
 */

import type * as z from "zod";
import { IsbError } from "../errors.ts";
import type { ExecRegistry } from "../sandbox/exec/registry.ts";

/** The events a request may send before its reply. */
export type EventName = "progress" | "stdout" | "stderr";

/** What a handler gets besides its params. `Engine` is the sandbox engine (rpc/sandbox). */
export interface CallContext<Engine = unknown> {
  /** The request's id as sent (any JSON). */
  id: unknown;
  /** The request id rendered as a string key (exec pre-registration uses it). */
  key: string;
  /**
   * Sends an event line for this request (before its reply). The server's implementation
   * returns a promise that settles once the line is written, for callers that need
   * backpressure (exec output); others may ignore it.
   */
  emit(event: EventName, data: unknown): void | Promise<void>;
  /** The sandbox engine, shared by all requests. */
  engine: Engine;
  /** The server's exec ids (set by the server; only the exec methods use it). */
  execs?: ExecRegistry;
}

/**
 * A method: raw params in, result out (or a thrown error). One marked {@link engineFree} never
 * reads `ctx.engine`, so the server answers it without waiting for the engine.
 */
export type Handler<Engine = unknown> =
  & ((raw: unknown, ctx: CallContext<Engine>) => Promise<unknown>)
  & { readonly engineFree?: true };

/**
 * Marks a handler that needs no engine (`version`, `schema`: they need no Incus, §14 "incusd
 * down"), so it is answered while the engine is still loading, or when making it failed.
 */
export function engineFree<Engine>(
  run: (raw: unknown, ctx: CallContext<Engine>) => Promise<unknown>,
): Handler<Engine> {
  return Object.assign(run, { engineFree: true as const });
}

/** Formats a zod error as the spec's `params: …` message, naming the offending field. */
export function paramsMessage(error: z.ZodError): string {
  const parts = error.issues.map((issue) => {
    const path = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") {
      const keys = issue.keys.map((k) => `\`${k}\``).join(", ");
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${keys}${path ? ` in ${path}` : ""}`;
    }
    return path ? `${path}: ${issue.message}` : issue.message;
  });
  return `params: ${parts.join("; ")}`;
}

/** Parses params (absent or null = `{}`) or throws `invalid` naming the field. */
export function parseParams<S extends z.ZodType>(schema: S, raw: unknown): z.infer<S> {
  const r = schema.safeParse(raw ?? {});
  if (!r.success) throw new IsbError("invalid", paramsMessage(r.error));
  return r.data;
}

/**
 * Builds a handler from a params schema (or a function that builds it, called on the first
 * call: a group's schemas are then built one by one as their methods are called, not all
 * when the group loads) and a typed function.
 */
export function method<S extends z.ZodType, Engine = unknown>(
  params: S | (() => S),
  run: (p: z.infer<S>, ctx: CallContext<Engine>) => Promise<unknown>,
): Handler<Engine> {
  let schema = typeof params === "function" ? undefined : params;
  return (raw, ctx) => {
    schema ??= (params as () => S)();
    return run(parseParams(schema, raw), ctx);
  };
}

/** A value (a schema shared by several methods) made on first use, then the same one. */
export function once<T>(make: () => T): () => T {
  let v: T | undefined;
  return () => (v ??= make());
}

/** The wire form of an error reply. */
export interface WireError {
  code: string;
  message: string;
  data?: Record<string, unknown>;
}

/** Maps anything thrown to the wire error; unknown throwables become `io`. */
export function toWire(e: unknown): WireError {
  if (e instanceof IsbError) {
    return e.data === undefined
      ? { code: e.code, message: e.message }
      : { code: e.code, message: e.message, data: e.data };
  }
  if (e instanceof Deno.errors.NotCapable) {
    return { code: "io", message: `not permitted: ${e.message}` };
  }
  const message = e instanceof Error ? e.message : String(e);
  return { code: "io", message };
}
