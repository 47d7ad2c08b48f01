/**
 * Running one command in a sandbox the way `sandbox.exec` does (shared/spec/isb-rpc.md §11):
 * building the request (user, env with HOME/USER/LOGNAME, login-shell wrapper, TERM, cwd),
 * feeding stdin (none, bytes in 64 KiB chunks, or piped through a controller), pumping
 * output either into buffers or out as chunks as it is produced, and the timeout (signal 9,
 * then `exec_timeout`).
 *
 * The Incus side (websockets, the operation, the exit code) is the client's
 * {@link ExecSession}; this module is the policy around it. A running exec is driven from
 * outside through an {@link ExecControl}, which the server files under the request's id
 * (`registry.ts`). Backpressure: at most 256 output chunks wait to be written and at
 * most 16 stdin chunks wait to be sent; beyond that the pump or the writer waits.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import { formatDuration } from "../../duration.ts";
import type { ExecSession, IncusClient } from "../../incus/mod.ts";
import type { ExecControl } from "./registry.ts";
import { StdinPump } from "./_stdin.ts";
import { loginShell, resolveExecUser } from "./user.ts";

/** The client calls an exec makes. */
export type ExecClient = Pick<IncusClient, "exec" | "execCapture" | "pullFile">;

/** Stdin of an exec: none (EOF at once), bytes then EOF, or piped through the controller. */
export type ExecStdin = "null" | "piped" | Uint8Array;

/** One exec, with call values already merged over the spec's exec defaults. */
export interface ExecRequest {
  /** Instance name. */
  name: string;
  /** The command; never joined into a shell line. */
  argv: string[];
  /** `NAME`, `UID`, `UID:GID` or `NAME:GROUP`; root when absent. */
  user?: string;
  /** Working directory; the user's home when absent. */
  cwd?: string;
  /** Environment (defaults.env ⊕ call env). */
  env?: Record<string, string>;
  /** Run through the user's login shell. */
  login?: boolean;
  /** Allocate a pty. */
  tty?: boolean;
  /** Terminal width in columns (tty only; 80 by default). */
  width?: number;
  /** Terminal height in rows (tty only; 24 by default). */
  height?: number;
  /** Kill after this long and fail with `exec_timeout`. */
  timeoutMs?: number;
  /** Stdin; `"null"` when absent. */
  stdin?: ExecStdin;
  /** `TERM` for a tty when env has none (the server's `$TERM`). */
  term?: string;
  /** Most bytes of buffered output, stdout and stderr together ({@link BUFFER_LIMIT}). */
  bufferLimit?: number;
}

/** Where output goes and how the caller learns the exec's lifecycle. */
export interface ExecHooks {
  /** Streams output chunk by chunk; without it output is buffered into the result. */
  onOutput?(stream: "stdout" | "stderr", chunk: Uint8Array): void | Promise<void>;
  /** The command runs: control calls may now reach it. */
  onStart?(control: ExecControl): void;
  /** The command exited: control calls no longer reach it. */
  onExit?(): void;
}

/** How an exec ended. `stdout`/`stderr` only when output was buffered. */
export interface ExecOutcome {
  /** The command's exit status as Incus reports it. */
  exitCode: number;
  /** Everything the command wrote to stdout, when no `onOutput` hook took it. */
  stdout?: Uint8Array;
  /** Everything the command wrote to stderr, when no `onOutput` hook took it. */
  stderr?: Uint8Array;
}

/** Stdin chunk size for bytes given up front. */
export const STDIN_CHUNK = 64 * 1024;
/** Most output chunks waiting to be written before the pump waits. */
export const OUTPUT_WINDOW = 256;
export { STDIN_WINDOW } from "./_stdin.ts";
/** How long a killed command may take to end before `exec_timeout` is thrown anyway. */
export const KILL_GRACE_MS = 10_000;
/**
 * Most bytes a buffered exec may write (stdout and stderr together): the result is one JSON
 * line holding it all in base64, so more is killed and refused; streaming has no such limit.
 */
export const BUFFER_LIMIT = 32 * 1024 * 1024;

/** Runs a command to its end; a non-zero exit is a result, not an error. */
export async function runExec(
  client: ExecClient,
  req: ExecRequest,
  hooks: ExecHooks = {},
): Promise<ExecOutcome> {
  if (req.argv.length === 0) throw new IsbError("invalid", "exec needs a command");
  const user = await resolveExecUser(client, req.name, req.user, { needEntry: req.login === true });
  const env = { ...req.env };
  if (user.entry) {
    env.HOME ??= user.entry.home;
    env.USER ??= user.entry.name;
    env.LOGNAME ??= user.entry.name;
  }
  if (req.tty) env.TERM ??= req.term || "xterm-256color";
  const command = req.login
    ? [loginShell(user.entry), "-l", "-c", 'exec "$@"', "isb", ...req.argv]
    : req.argv;
  const cwd = req.cwd ?? user.entry?.home;
  const session = await client.exec(req.name, {
    command,
    env,
    user: user.uid,
    group: user.gid,
    interactive: req.tty === true,
    ...(cwd ? { cwd } : {}),
    ...(req.tty ? { width: req.width ?? 80, height: req.height ?? 24 } : {}),
  });
  try {
    return await drive(session, req, hooks);
  } finally {
    session.close();
  }
}

async function drive(session: ExecSession, req: ExecRequest, hooks: ExecHooks) {
  const stdin = new StdinPump(session, req.stdin === "piped", req.tty === true);
  const control: ExecControl = {
    write: (data) => stdin.write(data),
    closeStdin: () => stdin.close(),
    signal: (n) => session.signal(n),
    resize: (w, h) => req.tty ? session.resize(w, h) : Promise.resolve(),
  };
  const feeding = feed(stdin, req.stdin ?? "null");
  hooks.onStart?.(control);
  const limit = req.bufferLimit ?? BUFFER_LIMIT;
  const buffered = { bytes: 0, over: false };
  const overflow = (n: number) => {
    buffered.bytes += n;
    if (buffered.bytes <= limit || buffered.over) return buffered.over;
    buffered.over = true;
    session.signal(9).catch(() => {}); // the rest is read and dropped until the exit
    return true;
  };
  const out = pump(session.stdout, "stdout", hooks, overflow);
  const err = pump(session.stderr, "stderr", hooks, overflow);
  // Whatever ends the exec first (exit, timeout, a failed wait), these must never reject
  // unobserved: an unhandled rejection would take the whole server down.
  for (const p of [feeding, out, err]) p.catch(() => {});
  let killed = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  const exited = session.exit.then((code) => ({ code }));
  const outcome = await (async () => {
    if (req.timeoutMs === undefined) return await exited;
    const deadline = new Promise<"deadline">((resolve) => {
      timer = setTimeout(() => resolve("deadline"), req.timeoutMs);
    });
    const first = await Promise.race([exited, deadline]);
    if (first !== "deadline") return first;
    killed = true;
    await session.signal(9).catch(() => {});
    const grace = new Promise<"grace">((resolve) => {
      graceTimer = setTimeout(() => resolve("grace"), KILL_GRACE_MS);
    });
    return await Promise.race([exited, grace]);
  })().finally(() => {
    clearTimeout(timer);
    clearTimeout(graceTimer);
    hooks.onExit?.();
  });
  if (killed) {
    const ms = req.timeoutMs ?? 0;
    throw new IsbError(
      "exec_timeout",
      `exec ${req.argv.join(" ")} timed out after ${formatDuration(ms)} (killed)`,
      { data: { timeout_secs: ms / 1000 } },
    );
  }
  const [stdout, stderr] = await Promise.all([out, err]);
  await feeding.catch(() => {}); // stdin may fail once the command is gone; that is no error
  if (buffered.over) {
    throw new IsbError(
      "invalid",
      `exec ${req.argv.join(" ")} wrote more than ${limit / 1024 / 1024} MiB of output, the ` +
        'limit of a buffered exec (killed): pass "stream": true to receive output as it is ' +
        "produced",
    );
  }
  const exitCode = (outcome as { code: number }).code;
  return hooks.onOutput ? { exitCode } : { exitCode, stdout, stderr };
}

/** Feeds stdin given up front: EOF at once, or the bytes in chunks then EOF. */
async function feed(stdin: StdinPump, mode: ExecStdin): Promise<void> {
  if (mode === "piped") return;
  if (mode !== "null") {
    for (let i = 0; i < mode.length; i += STDIN_CHUNK) {
      await stdin.send(mode.subarray(i, i + STDIN_CHUNK));
    }
  }
  await stdin.send(undefined);
}

/**
 * Reads one output stream: chunks to `onOutput` (≤256 unwritten), or into one buffer until
 * `overflow` (counting both streams) says the limit is passed; then the rest is dropped.
 */
async function pump(
  stream: ReadableStream<Uint8Array>,
  name: "stdout" | "stderr",
  hooks: ExecHooks,
  overflow: (n: number) => boolean,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const unwritten: Promise<void>[] = [];
  for await (const chunk of stream) {
    if (chunk.length === 0) continue;
    if (!hooks.onOutput) {
      if (overflow(chunk.length)) chunks.length = 0;
      else chunks.push(chunk);
      continue;
    }
    const sent = hooks.onOutput(name, chunk);
    if (sent) unwritten.push(sent);
    if (unwritten.length >= OUTPUT_WINDOW) await unwritten.shift();
  }
  await Promise.all(unwritten);
  return concat(chunks);
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) out.set(c, at), at += c.length;
  return out;
}
