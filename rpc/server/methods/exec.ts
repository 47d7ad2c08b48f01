/**
 * `sandbox.exec` and its control calls `exec.write|close_stdin|signal|resize`
 * (shared/spec/isb-rpc.md §5.4, §5.5, §11): params on the wire (base64 bytes, duration
 * strings, the stdin modes) become an {@link ExecRequest} for `rpc/sandbox/exec/exec.ts`, and its
 * output becomes `stdout`/`stderr` events or a buffered base64 result.
 *
 * The control calls carry no `project` (the spec's structs have none, so sending one is
 * `invalid`); they reach the exec through the server's registry by the `sandbox.exec`
 * request's id, queued while it is pending.
 *
 * @module
 */

import * as z from "zod";
import { IsbError } from "../../errors.ts";
import { parseDuration } from "../../duration.ts";
import { type ExecClient, type ExecStdin, runExec } from "../../sandbox/exec/exec.ts";
import { type ControlOp, execKey, ExecRegistry } from "../../sandbox/exec/registry.ts";
// its own module, not spec.ts: sandbox.exec needs none of the other spec schemas
import { ExecDefaultsSchema } from "../../sandbox/spec/exec_defaults.ts";
import { type CallContext, engineFree, type Handler, method } from "../dispatch.ts";

/** What the exec methods need from the engine. */
export interface ExecEngine {
  /** The Incus client for a request's project (absent = the server's default project). */
  client(project?: string): ExecClient;
  /** The server's `$TERM`, for tty execs that set none. */
  readonly term?: string | undefined;
}

/** Standard base64 with padding (output side). */
export function encodeBase64(bytes: Uint8Array): string {
  return bytes.toBase64();
}

/**
 * Lenient base64 (input side, §4): padding optional, decoding stops at the first `=`,
 * `\n`, `\r` and spaces are skipped; any other character outside the alphabet is `invalid`.
 */
export function decodeBase64(text: string): Uint8Array {
  let s = text.replace(/[\n\r ]/g, "");
  const eq = s.indexOf("=");
  if (eq >= 0) s = s.slice(0, eq);
  if (!/^[A-Za-z0-9+/]*$/.test(s) || s.length % 4 === 1) {
    throw new IsbError("invalid", "invalid base64");
  }
  return Uint8Array.fromBase64(s, { lastChunkHandling: "loose" });
}

const Base64 = z.string().transform((s, ctx) => {
  try {
    return decodeBase64(s);
  } catch {
    ctx.addIssue({ code: "custom", message: "invalid base64" });
    return z.NEVER;
  }
});

const Duration = z.string().transform((s, ctx) => {
  try {
    return parseDuration(s);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});

const Stdin = z.union([
  z.literal("null"),
  z.literal("piped"),
  z.strictObject({ data: Base64 }),
], { error: 'expected "null", "piped" or {"data": base64}' });

const U16 = z.int().min(0).max(65535);

/** Params of `sandbox.exec`. */
export const ExecParams = z.strictObject({
  name: z.string(),
  argv: z.array(z.string()),
  defaults: ExecDefaultsSchema.optional(),
  cwd: z.string().optional(),
  user: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  login: z.boolean().optional(),
  tty: z.boolean().optional(),
  width: U16.optional(),
  height: U16.optional(),
  timeout: Duration.optional(),
  stdin: Stdin.optional(),
  stream: z.boolean().optional(),
  project: z.string().optional(),
});

/** The `exec` param of the control calls: the sandbox.exec request's id (any JSON, required). */
const ExecId = z.custom<unknown>((v) => v !== undefined, { error: "missing field `exec`" });

function registry(ctx: CallContext<unknown>): ExecRegistry {
  if (!ctx.execs) throw new TypeError("exec methods need the server's exec registry");
  return ctx.execs;
}

function control<S extends z.ZodType<{ exec?: unknown }>>(
  params: S,
  op: (p: z.infer<S>) => ControlOp,
): Handler<ExecEngine> {
  // the server's registry only, never the engine: answered while it loads (§14: exec.* on
  // unknown ids need no Incus)
  return engineFree(method(params, async (p: z.infer<S>, ctx) => {
    await registry(ctx).control(execKey(p.exec), op(p));
    return null;
  }));
}

async function sandboxExec(p: z.infer<typeof ExecParams>, ctx: CallContext<ExecEngine>) {
  const slot = (ctx.execs ?? new ExecRegistry()).claim(ctx.key);
  if (p.argv.length === 0) throw new IsbError("invalid", "exec needs a command");
  const d = p.defaults ?? {};
  const stdin: ExecStdin = p.stdin === undefined || typeof p.stdin === "string"
    ? (p.stdin ?? "null")
    : p.stdin.data;
  const user = p.user ?? d.user;
  const cwd = p.cwd ?? d.cwd;
  const login = p.login ?? d.login;
  const term = ctx.engine.term;
  const outcome = await runExec(ctx.engine.client(p.project), {
    name: p.name,
    argv: p.argv,
    env: { ...d.env, ...p.env },
    stdin,
    ...(user !== undefined ? { user } : {}),
    ...(cwd !== undefined ? { cwd } : {}),
    ...(login !== undefined ? { login } : {}),
    ...(p.tty !== undefined ? { tty: p.tty } : {}),
    ...(p.width !== undefined ? { width: p.width } : {}),
    ...(p.height !== undefined ? { height: p.height } : {}),
    ...(p.timeout !== undefined ? { timeoutMs: p.timeout } : {}),
    ...(term ? { term } : {}),
  }, {
    onStart: (c) => slot.start(c),
    onExit: () => slot.finish(),
    ...(p.stream ? { onOutput: (s, chunk) => ctx.emit(s, encodeBase64(chunk)) } : {}),
  }).finally(() => slot.finish());
  if (p.stream) return { exit_code: outcome.exitCode };
  return {
    exit_code: outcome.exitCode,
    stdout: encodeBase64(outcome.stdout ?? new Uint8Array()),
    stderr: encodeBase64(outcome.stderr ?? new Uint8Array()),
  };
}

/** The exec group's handlers. */
export const execMethods: Record<string, Handler<ExecEngine>> = {
  "sandbox.exec": method(ExecParams, sandboxExec),
  "exec.write": control(
    z.strictObject({ exec: ExecId, data: Base64 }),
    (p) => (c) => c.write(p.data),
  ),
  "exec.close_stdin": control(z.strictObject({ exec: ExecId }), () => (c) => c.closeStdin()),
  "exec.signal": control(
    z.strictObject({ exec: ExecId, signal: z.int().min(-2147483648).max(2147483647) }),
    (p) => (c) => c.signal(p.signal),
  ),
  "exec.resize": control(
    z.strictObject({ exec: ExecId, width: U16, height: U16 }),
    (p) => (c) => c.resize(p.width, p.height),
  ),
};
