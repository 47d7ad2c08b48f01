/**
 * Exec over websockets: `POST /1.0/instances/N/exec` with `wait-for-websocket`, then one
 * websocket per stream on the operation (`control` + fds 0, 1, 2; or `control` + one
 * bidirectional fd with a pty). The command starts once every socket is connected.
 * Output arrives as binary frames and ends with an empty text frame or a close; stdin ends
 * with the same barrier. The exit code is the operation's `metadata.return`. The control
 * socket closes only after the operation finished: closing it earlier kills the command.
 *
 * Output streams are `ReadableStream`s holding at most 256 chunks: past that the socket is
 * paused, so a slow reader slows the command instead of growing memory. Read or cancel
 * `stdout`/`stderr`, or a chatty command never finishes.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { formatDuration } from "../duration.ts";
import { type IncusConn, seg } from "./conn.ts";
import { cancelOperation, operationId, waitOperation } from "./operations.ts";
import type { WsClient } from "./websocket.ts";
import { emptyStream, ExecStreams, outputStream } from "./_exec_streams.ts";
import type { Operation } from "./types.ts";

/** What to run and how. */
export interface ExecOptions {
  /** argv; never a shell string. */
  command: string[];
  /** Environment variables (Incus adds PATH and friends when missing). */
  env?: Record<string, string>;
  /** Working directory inside the instance. */
  cwd?: string;
  /** Numeric uid to run as (default 0). */
  user?: number;
  /** Numeric gid to run as (default 0). */
  group?: number;
  /** Allocate a pty: one bidirectional stream instead of stdin/stdout/stderr. */
  interactive?: boolean;
  /** Terminal width (interactive only; default 80). */
  width?: number;
  /** Terminal height (interactive only; default 24). */
  height?: number;
}

/** A running command. */
export interface ExecSession {
  /** The Incus operation id. */
  readonly operation: string;
  /** Standard output (the terminal's output when interactive). */
  readonly stdout: ReadableStream<Uint8Array>;
  /** Standard error (empty and closed when interactive). */
  readonly stderr: ReadableStream<Uint8Array>;
  /** The exit code, from the operation's `metadata.return` (−1 if absent). */
  readonly exit: Promise<number>;
  /** Sends bytes to stdin; resolves when they are handed to the socket. */
  write(data: Uint8Array): Promise<void>;
  /** Ends stdin (EOF). */
  closeStdin(): Promise<void>;
  /** Sends a signal to the command (e.g. 15, 9). */
  signal(signal: number): Promise<void>;
  /** Resizes the terminal (interactive only). */
  resize(width: number, height: number): Promise<void>;
  /** Drops every socket now (after `exit`, this only releases resources). */
  close(): void;
}

/** Options of {@link execCapture}. */
export interface CaptureOptions {
  /** Bytes (or text) fed to stdin, then EOF; no stdin when absent. */
  stdin?: Uint8Array | string;
  /** Environment variables. */
  env?: Record<string, string>;
  /** Working directory inside the instance. */
  cwd?: string;
  /** Numeric uid to run as. */
  user?: number;
  /** Numeric gid to run as. */
  group?: number;
  /** Kill the command (signal 9) after this long and fail with `exec_timeout`. */
  timeoutMs?: number;
}

/** The outcome of {@link execCapture}. */
export interface ExecResult {
  /** The command's exit code. */
  exitCode: number;
  /** Everything written to stdout. */
  stdout: Uint8Array;
  /** Everything written to stderr. */
  stderr: Uint8Array;
}

/** Starts a command; the session streams its output and resolves its exit code. */
export async function execStart(
  conn: IncusConn,
  name: string,
  opts: ExecOptions,
): Promise<ExecSession> {
  const interactive = opts.interactive ?? false;
  const body = {
    command: opts.command,
    environment: opts.env ?? {},
    "wait-for-websocket": true,
    interactive,
    "record-output": false,
    user: opts.user ?? 0,
    group: opts.group ?? 0,
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    ...(interactive ? { width: opts.width ?? 80, height: opts.height ?? 24 } : {}),
  };
  const op = await conn.async("POST", `/1.0/instances/${seg(name)}/exec`, { body });
  const id = operationId(op);
  const fds = (op.metadata.metadata as { fds?: Record<string, string> } | null)?.fds ?? {};
  const keys = interactive ? ["control", "0"] : ["control", "0", "1", "2"];
  const outputs = new Map<string, ReadableStream<Uint8Array>>();
  const attach = (k: string) => (ws: WsClient) => void outputs.set(k, outputStream(ws));
  const opened = await Promise.allSettled(
    keys.map((k) => openFd(conn, id, fds[k], k, k === "control" ? undefined : attach(k))),
  );
  const sockets = opened.flatMap((r) => r.status === "fulfilled" ? [r.value] : []);
  const failed = opened.find((r) => r.status === "rejected");
  if (failed) {
    for (const ws of sockets) ws.terminate();
    await cancelOperation(conn, id);
    throw failed.reason;
  }
  const step = `exec ${opts.command[0] ?? ""} in ${name}`;
  const wait = () => waitOperation(conn, id, { step, deadlineMs: Infinity }).catch(shellCode);
  const stdout = outputs.get(interactive ? "0" : "1")!;
  const stderr = outputs.get("2") ?? emptyStream();
  return new ExecStreams(id, sockets, { interactive, wait, stdout, stderr });
}

/** A command incusd could not start gets the shell's exit code, as `incus exec` does. */
function shellCode(e: unknown): Operation {
  const m = e instanceof IsbError && e.code === "operation_failed" ? e.message : "";
  const code = m.endsWith("Command not found") ? 127 : m.endsWith("not executable") ? 126 : -1;
  if (code < 0) throw e;
  return { metadata: { return: code } } as unknown as Operation;
}

function openFd(
  conn: IncusConn,
  id: string,
  secret: string | undefined,
  fd: string,
  setup: ((ws: WsClient) => void) | undefined,
): Promise<WsClient> {
  if (!secret) {
    return Promise.reject(new IsbError("protocol", `exec: incusd gave no secret for fd ${fd}`));
  }
  const path = conn.url(`/1.0/operations/${seg(id)}/websocket`, { query: { secret } });
  return conn.transport.openWebSocket(path, conn.timeouts.requestMs, setup);
}

/** Runs a command to completion and collects its output. */
export async function execCapture(
  conn: IncusConn,
  name: string,
  argv: string[],
  opts: CaptureOptions = {},
): Promise<ExecResult> {
  const { stdin, timeoutMs, ...rest } = opts;
  const s = await execStart(conn, name, { command: argv, ...rest });
  const outputs = Promise.all([collect(s.stdout), collect(s.stderr)]);
  // awaited below, but it can reject (a socket reset as the instance stops) while the exit
  // is still awaited: handled from the start, or the process sees an unhandled rejection
  outputs.catch(() => {});
  void feed(s, stdin);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let killed = false;
  const deadline = new Promise<never>((_, reject) => {
    if (timeoutMs === undefined) return;
    timer = setTimeout(() => {
      killed = true;
      s.signal(9).catch(() => {}); // a socket already gone: the deadline still rejects below
      timer = setTimeout(() => reject(timedOut(argv, timeoutMs)), 10_000);
    }, timeoutMs);
  });
  try {
    const exitCode = await Promise.race([s.exit, deadline]);
    if (killed) throw timedOut(argv, timeoutMs ?? 0);
    const [stdout, stderr] = await outputs;
    return { exitCode, stdout, stderr };
  } finally {
    clearTimeout(timer);
    s.close();
    await outputs.catch(() => {});
  }
}

async function feed(s: ExecSession, stdin: Uint8Array | string | undefined): Promise<void> {
  try {
    const data = typeof stdin === "string" ? new TextEncoder().encode(stdin) : stdin;
    if (data) await s.write(data);
    await s.closeStdin();
  } catch {
    // the command ended without reading all of stdin, as `cmd < file` allows
  }
}

/** Reads a byte stream to its end. */
export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    parts.push(chunk);
    size += chunk.length;
  }
  const out = new Uint8Array(size);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function timedOut(argv: string[], ms: number): IsbError {
  return new IsbError(
    "exec_timeout",
    `exec ${argv.join(" ")} timed out after ${formatDuration(ms)} (killed)`,
    { data: { timeout_secs: ms / 1000 } },
  );
}
