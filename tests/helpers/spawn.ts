/**
 * Spawns the program (`main.ts`) the way the launchers in `bin/` do: `deno run` with
 * exactly the permission flags of `launchFlags(contextFrom(...), launchMode(...))` from
 * cli/permissions.ts,
 * computed for the child's environment, cwd and `--socket`, and `ISX_PROG` naming the
 * program. Process tests drive it through the returned handle: line reader and writer
 * helpers with deadlines, the collected stderr, and disposal that closes stdin, waits and
 * kills as a last resort, so no test leaks a child or a pipe.
 *
 * @module
 */

import { splitGlobal } from "../../cli/args.ts";
import { launchFlags, launchMode } from "../../cli/launch.ts";
import { contextFrom } from "../../cli/permissions.ts";
import { followedDefaultRemote, readIfPermitted } from "../../cli/perm_context.ts";
import { lines } from "../../rpc/jsonl.ts";

/** The repository root. */
export const ROOT: string = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** Options of {@link spawnProgram}. */
export interface SpawnOptions {
  /** Variables set for the child, over the test's own environment. */
  env?: Record<string, string>;
  /** Working directory of the child (default: the test's cwd). */
  cwd?: string;
  /** The program name (default: `ISX_PROG` of `env`, else `isb`). */
  prog?: "isb" | "isx";
  /** Start through the launcher a user runs (`bin/isb`, `bin/isx`) instead of `deno run`. */
  launcher?: boolean;
}

/** A running program. */
export interface ProgramHandle extends AsyncDisposable {
  /** The child process. */
  readonly child: Deno.ChildProcess;
  /** The exact `deno run` arguments used (the launcher's arguments with `launcher`). */
  readonly args: readonly string[];
  /** The next stdout line, or `undefined` at EOF; rejects after `timeoutMs` (default 30 s). */
  readLine(timeoutMs?: number): Promise<string | undefined>;
  /** The next stdout line parsed as JSON; rejects at EOF or on a non-JSON line. */
  readJson(timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Writes raw text to stdin (add your own `\n`). */
  write(text: string | Uint8Array): Promise<void>;
  /** Writes one value as a JSON line. */
  send(value: unknown): Promise<void>;
  /** Closes stdin (EOF for the program). */
  closeStdin(): Promise<void>;
  /** Everything written to stderr so far. */
  stderr(): string;
  /** Waits for the exit (after stdin is closed); rejects after `timeoutMs` (default 30 s). */
  wait(timeoutMs?: number): Promise<Deno.CommandStatus>;
}

/** The `deno run` arguments that start `main.ts` with `args` under the permission table. */
export function programArgs(args: string[], opts: SpawnOptions = {}): string[] {
  const env = (k: string) => opts.env?.[k] ?? Deno.env.get(k);
  let socket: string | undefined;
  let command: string | undefined;
  let remote = false;
  try {
    const parsed = splitGlobal(args, env);
    socket = parsed.global.socket;
    command = parsed.command;
    remote = parsed.global.remote !== undefined ||
      followedDefaultRemote(env, {
          socketFlag: parsed.global.socketFlag === true,
          read: readIfPermitted,
        }) !== undefined;
  } catch {
    socket = undefined;
  }
  const ctx = contextFrom(env, {
    cwd: opts.cwd ?? Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: ROOT,
    execPath: Deno.execPath(),
    ...(socket ? { socket } : {}),
    remote,
  });
  // the program name as the child sees it: opts.prog, else ISX_PROG in its env, else isb
  const prog = opts.prog ?? opts.env?.ISX_PROG ?? "isb";
  const flags = launchFlags(ctx, launchMode(prog, command));
  return [
    "run",
    "--quiet",
    "--cached-only",
    "--config",
    `${ROOT}/deno.json`,
    ...flags,
    `${ROOT}/main.ts`,
    ...args,
  ];
}

/** Starts the program with `args`; dispose the handle (`await using`) to end it. */
export function spawnProgram(args: string[], opts: SpawnOptions = {}): ProgramHandle {
  const prog = opts.prog ?? opts.env?.ISX_PROG ?? "isb";
  const argv = opts.launcher ? args : programArgs(args, opts);
  const child = new Deno.Command(opts.launcher ? `${ROOT}/bin/${prog}` : Deno.execPath(), {
    args: argv,
    env: { NO_COLOR: "1", ...opts.env, ISX_PROG: prog },
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const out = lines(child.stdout).getReader();
  const stdin = child.stdin.getWriter();
  let stdinOpen = true;
  let errText = "";
  const errDone = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) errText += dec.decode(chunk, { stream: true });
  })();
  let pending: Promise<ReadableStreamReadResult<string>> | undefined;
  const encoder = new TextEncoder();

  async function readLine(timeoutMs = 30_000): Promise<string | undefined> {
    pending ??= out.read();
    const r = await deadline(pending, timeoutMs, "a stdout line");
    pending = undefined;
    return r.done ? undefined : r.value;
  }

  async function closeStdin(): Promise<void> {
    if (!stdinOpen) return;
    stdinOpen = false;
    await stdin.close().catch(() => {});
  }

  return {
    child,
    args: argv,
    readLine,
    async readJson(timeoutMs) {
      const line = await readLine(timeoutMs);
      if (line === undefined) throw new Error(`stdout ended; stderr: ${errText}`);
      try {
        return JSON.parse(line);
      } catch {
        throw new Error(`stdout line is not JSON: ${JSON.stringify(line.slice(0, 200))}`);
      }
    },
    write: (text) => stdin.write(typeof text === "string" ? encoder.encode(text) : text),
    send: (value) => stdin.write(encoder.encode(JSON.stringify(value) + "\n")),
    closeStdin,
    stderr: () => errText,
    wait: (timeoutMs = 30_000) => deadline(child.status, timeoutMs, "the program to exit"),
    async [Symbol.asyncDispose]() {
      await closeStdin();
      try {
        await deadline(child.status, 10_000, "exit");
      } catch {
        try {
          child.kill("SIGKILL");
        } catch { /* already gone */ }
        await child.status;
      }
      if (pending) await pending.catch(() => {});
      await out.cancel().catch(() => {});
      await errDone.catch(() => {});
    },
  };
}

/** Resolves like `p`, or rejects after `ms` naming what it waited for. */
export async function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
