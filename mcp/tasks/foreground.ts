/**
 * Foreground commands (spec §2.5): one websocket exec of guest/_foreground_shell.ts's
 * `foregroundArgv` starts the command as the agent user in a login shell, in its own
 * session whose id it records, under `timeout` when one is set; no root shell runs in
 * between. The login shell waits for its working directory on stdin: a caller still
 * checking (a `cwd` promise) overlaps that check with the exec's start, and a failed check
 * ends the shell before it ran anything. Output streams back
 * as it is written; the host keeps only capped tails and hands complete lines to a progress
 * callback. Cancelling (the caller's AbortSignal) runs a second exec that kills the whole
 * session (TERM, 3 s, KILL), repeated while the first exec has not ended (a cancel that
 * lands before the pid file exists would otherwise miss).
 *
 * @module
 */

import { type Clock, type ExecSession, type IncusClient, IsbError } from "../../rpc/base.ts";
import { FOREGROUND_KILL_SH, foregroundArgv } from "../../guest/mod.ts";
import { runGuestScript, SCRIPT_ENV } from "./guest_exec.ts";
import { foregroundSetup } from "./script.ts";
import {
  LineSplitter,
  MAX_OUTPUT_BYTES,
  MAX_STDIN_BYTES,
  MIN_OUTPUT_BYTES,
  TailBuffer,
} from "./tail.ts";

/** A foreground command (spec §2.5). */
export interface ForegroundOptions {
  /** The command, run as `bash -c`. */
  command: string;
  /** Variables exported for it. */
  env?: Record<string, string>;
  /**
   * Working directory (relative: to home; default home). A promise starts the exec at once
   * but runs nothing until it resolves (the caller's checks overlap the exec's start); when
   * it rejects, the exec ends unarmed and the rejection is thrown.
   */
  cwd?: string | Promise<string>;
  /** Bytes fed to its stdin (at most 1 MiB), then EOF. */
  stdin?: string;
  /** Kill it after this many seconds (`timeout --kill-after=10s`); no limit when absent. */
  timeoutSeconds?: number;
  /** Tail size of each stream, clamped to 256 B…256 KiB. */
  outputBytes: number;
  /** Aborting it kills the command's whole process session in the guest. */
  signal: AbortSignal;
  /** Called with each complete output line (stdout and stderr), at most 1000 chars. */
  onOutputLine?: (line: string) => void;
}

/** The outcome of a foreground command (spec §2.5 output). */
export interface ForegroundResult {
  /** The exit code; 125 = could not `cd`; −1 = isx lost track (it may still run). */
  exit_code: number;
  /** Wall time, milliseconds. */
  duration_ms: number;
  /** A timeout was set and the exit was 124 or 137. */
  timed_out: boolean;
  /** The caller cancelled it. */
  cancelled: boolean;
  /** The tail of stdout. */
  stdout: string;
  /** The tail of stderr. */
  stderr: string;
  /** All of stdout's size. */
  stdout_bytes: number;
  /** All of stderr's size. */
  stderr_bytes: number;
  /** True when either tail is shorter than its stream. */
  truncated: boolean;
}

let counter = 0;

async function pump(
  stream: ReadableStream<Uint8Array>,
  tail: TailBuffer,
  lines: LineSplitter,
): Promise<void> {
  try {
    for await (const chunk of stream) {
      tail.push(chunk);
      lines.push(chunk);
    }
  } catch { /* the exec ended abruptly: what arrived is kept */ }
  lines.end();
}

function validate(o: ForegroundOptions): void {
  if (o.stdin !== undefined && new TextEncoder().encode(o.stdin).length > MAX_STDIN_BYTES) {
    throw new IsbError("invalid", `stdin: at most ${MAX_STDIN_BYTES} bytes`);
  }
  const t = o.timeoutSeconds;
  if (t !== undefined && (!Number.isFinite(t) || t <= 0 || t > 1e7)) {
    throw new IsbError("invalid", "timeout_seconds: must be a number > 0");
  }
}

function checkCwd(cwd: string): string {
  if (cwd.includes("\0")) throw new IsbError("invalid", "cwd: must be a string without NUL");
  return cwd;
}

/**
 * Ends an exec that was never armed: end of stdin makes its login shell exit before it wrote
 * or ran anything; its output is dropped and its sockets closed once it ended (5 s at most).
 */
async function disarm(s: ExecSession, clock: Clock): Promise<void> {
  void s.stdout.cancel().catch(() => {});
  void s.stderr.cancel().catch(() => {});
  await s.closeStdin().catch(() => {});
  await Promise.race([s.exit.catch(() => -1), clock.sleep(5000)]);
  s.close();
}

/** Runs a foreground command to its end (or its cancellation). */
export async function runForeground(
  deps: { incus: IncusClient; clock: Clock; user: string },
  instance: string,
  o: ForegroundOptions,
): Promise<ForegroundResult> {
  validate(o);
  const cap = Math.min(MAX_OUTPUT_BYTES, Math.max(MIN_OUTPUT_BYTES, Math.floor(o.outputBytes)));
  const setup = foregroundSetup({ command: o.command, env: o.env });
  const name = `exec-${Deno.pid}-${++counter}`;
  // `timeout` takes a decimal number: milliseconds at most, never 0 or an exponent
  const t = o.timeoutSeconds === undefined
    ? ""
    : String(Math.max(0.001, Math.round(o.timeoutSeconds * 1000) / 1000));
  const started = deps.clock.now();
  const out = new TailBuffer(cap);
  const err = new TailBuffer(cap);
  const done = (exit_code: number, cancelled: boolean): ForegroundResult => ({
    exit_code,
    duration_ms: Math.round(deps.clock.now() - started),
    timed_out: t !== "" && (exit_code === 124 || exit_code === 137),
    cancelled,
    stdout: out.text(),
    stderr: err.text(),
    stdout_bytes: out.total,
    stderr_bytes: err.total,
    truncated: out.truncated || err.truncated,
  });
  if (o.signal.aborted) return done(-1, true);
  const line = o.onOutputLine ?? (() => {});
  const [opened, gate] = await Promise.allSettled([
    deps.incus.exec(instance, {
      command: foregroundArgv(deps.user, name, t, setup, o.command),
      env: SCRIPT_ENV,
      cwd: "/",
    }),
    Promise.resolve(o.cwd ?? "").then(checkCwd),
  ]);
  if (gate.status === "rejected" || o.signal.aborted) {
    if (opened.status === "fulfilled") await disarm(opened.value, deps.clock);
    if (gate.status === "rejected") throw gate.reason;
    return done(-1, true);
  }
  if (opened.status === "rejected") throw opened.reason;
  const s = opened.value;
  const pumps = Promise.all([
    pump(s.stdout, out, new LineSplitter(line)),
    pump(s.stderr, err, new LineSplitter(line)),
  ]);
  void (async () => {
    try {
      // the gate (the directory, NUL-ended) arms the login shell; the command's stdin follows
      await s.write(new TextEncoder().encode(`${gate.value}\0${o.stdin ?? ""}`));
      await s.closeStdin();
    } catch { /* the command ended without reading all of its stdin */ }
  })();
  let cancelled = false;
  let ended = false;
  let lose = () => {};
  const lost = new Promise<number>((r) => lose = () => r(-1));
  const exit = Promise.race([s.exit.catch(() => -1), lost]).finally(() => ended = true);
  const kill = async () => {
    cancelled = true;
    for (let i = 0; i < 3 && !ended; i++) {
      await runGuestScript(deps.incus, instance, FOREGROUND_KILL_SH, [name], {
        user: deps.user,
        step: "kill a foreground command",
        deadlineMs: 30_000,
      }).catch(() => {});
      const waited = deps.clock.now();
      while (!ended && deps.clock.now() - waited < 4000) await deps.clock.sleep(100);
    }
    if (!ended) {
      lose(); // isx lost track: the exit reads -1 (the command may still run)
      s.close(); // and the output streams end with the sockets
    }
  };
  const onAbort = () => void kill();
  o.signal.addEventListener("abort", onAbort, { once: true });
  try {
    const code = await exit;
    await pumps;
    return done(code, cancelled);
  } finally {
    o.signal.removeEventListener("abort", onAbort);
    s.close();
  }
}
