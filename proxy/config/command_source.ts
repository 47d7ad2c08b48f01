/**
 * Credentials that come from a command (`api_key: { command: [gh, auth, token], ttl: 55m }`
 * in credentials.yaml, Vertex's `token_command`): the proxy runs the argv itself, without a
 * shell, with stdin closed and stderr discarded, bounded in time ({@link COMMAND_TIMEOUT_MS})
 * and output ({@link COMMAND_MAX_BYTES}); the output, trimmed, must be one printable word.
 *
 * The rules, per command (its argv is its identity):
 * - a value is used for `ttl` from the start of the run that printed it;
 * - one run at a time, however many requests wait for it (single flight);
 * - a run starts at most once per `ttl` (counted from the last run's start), whether the
 *   last one worked or not, so no instance can make the host run a command more often by
 *   sending requests;
 * - an upstream 401 may force one extra run ({@link CommandSources.refresh}), at most once
 *   per `ttl` per command; concurrent 401s share it;
 * - a failed run keeps the last good value in force for one more `ttl` past its expiry
 *   (reported as failing), then the credential fails closed;
 * - the output is never logged nor put in an error, and every value ever printed is kept
 *   for scrubbing ({@link CommandSources.secrets}).
 *
 * The process (`Deno.Command`) and the clock are injected ({@link RunCommand}, `now`), so
 * the rules are tested without real waits and the runner with a real process.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import { Secret } from "./secret.ts";

/** How long a credential command may run. */
export const COMMAND_TIMEOUT_MS = 30_000;
/** The most output a credential command may print. */
export const COMMAND_MAX_BYTES = 64 * 1024;
/** How long a command's value is used when the file names no `ttl`. */
export const DEFAULT_COMMAND_TTL_MS = 5 * 60_000;

/** A value that comes from running `argv` (never through a shell), reused for `ttlMs`. */
export interface CommandRef {
  /** Tells a command from a {@link Secret}. */
  readonly kind: "command";
  /** The program and its arguments. */
  readonly argv: readonly string[];
  /** How long one value is used (ms). */
  readonly ttlMs: number;
}

/** A credential value as the file gives it: the value itself, or the command printing it. */
export type Value = Secret | CommandRef;

/** True for a command-sourced value. */
export function isCommand(v: Value): v is CommandRef {
  return !(v instanceof Secret);
}

/** Runs argv; resolves with exit code and stdout (up to `maxBytes`, else `tooLong`). */
export type RunCommand = (
  argv: readonly string[],
  limits: { timeoutMs: number; maxBytes: number },
) => Promise<{ code: number; stdout: Uint8Array; tooLong?: boolean; timedOut?: boolean }>;

/** The real runner: `Deno.Command`, no shell, stdin and stderr closed, killed on timeout. */
export const runCommand: RunCommand = async (argv, limits) => {
  const child = new Deno.Command(argv[0]!, {
    args: argv.slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  let timedOut = false;
  let tooLong = false;
  const kill = () => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, limits.timeoutMs);
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of child.stdout) {
      size += chunk.length;
      if (size > limits.maxBytes) {
        tooLong = true;
        kill();
        break;
      }
      chunks.push(chunk);
    }
    const status = await child.status;
    const stdout = new Uint8Array(Math.min(size, limits.maxBytes));
    let at = 0;
    for (const c of chunks) {
      stdout.set(c, at);
      at += c.length;
    }
    return { code: status.code, stdout, tooLong, timedOut };
  } finally {
    clearTimeout(timer);
  }
};

/** One command's state as `isx proxy status` shows it (never a value). */
export interface SourceStatus {
  /** The program (argv[0]); its arguments are not shown. */
  program: string;
  /** `ok` (a value in force), `refreshing`, `failing` (last run failed), `idle` (not run yet). */
  state: "ok" | "refreshing" | "failing" | "idle";
  /** How long a value is used (ms). */
  ttlMs: number;
  /** Runs so far. */
  runs: number;
  /** Until when the value in force is used (epoch ms; stale values included), if any. */
  expiresAt: number | null;
  /** When the runs started failing (epoch ms), if they are. */
  failingSince: number | null;
  /** Why the last run failed (never its output). */
  error: string | null;
}

interface Entry {
  argv: readonly string[];
  ttlMs: number;
  value?: Secret;
  /** Start of the run that printed `value`. */
  obtainedAt: number;
  lastRunAt?: number;
  lastForcedAt?: number;
  running?: Promise<void>;
  failingSince?: number;
  error?: string;
  runs: number;
}

/** Command-sourced values, cached and rate-bounded per argv. */
export class CommandSources {
  readonly #run: RunCommand;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #seen: Secret[] = [];
  readonly #what: string;

  /** Creates it with a runner and a clock; `what` names the credential in errors. */
  constructor(opts: { run?: RunCommand; now?: () => number; what?: string } = {}) {
    this.#run = opts.run ?? runCommand;
    this.#now = opts.now ?? Date.now;
    this.#what = opts.what ?? "a credential";
  }

  #entry(ref: CommandRef): Entry {
    const key = JSON.stringify(ref.argv);
    let e = this.#entries.get(key);
    if (!e) {
      e = { argv: [...ref.argv], ttlMs: ref.ttlMs, obtainedAt: -Infinity, runs: 0 };
      this.#entries.set(key, e);
    }
    e.ttlMs = ref.ttlMs; // the file in force says how long
    return e;
  }

  /** Every value any command printed so far (what responses are scrubbed of). */
  secrets(): Secret[] {
    return [...this.#seen];
  }

  /** The value for `ref`: cached, or from one run of its command (shared by all waiting). */
  async value(ref: CommandRef): Promise<Secret> {
    const e = this.#entry(ref);
    if (e.value && this.#now() < e.obtainedAt + e.ttlMs) return e.value;
    if (!e.running && (e.lastRunAt === undefined || this.#now() >= e.lastRunAt + e.ttlMs)) {
      e.running = this.#start(e);
    }
    if (e.running) await e.running;
    return this.#serve(e);
  }

  /**
   * After an upstream 401 with `used`: a value to retry with, or undefined (none newer, or
   * the forced run of this command already happened within its ttl, or it failed).
   */
  async refresh(ref: CommandRef, used: Secret): Promise<Secret | undefined> {
    const e = this.#entry(ref);
    const newer = () =>
      e.value && !e.value.equals(used) && this.#now() < e.obtainedAt + e.ttlMs
        ? e.value
        : undefined;
    if (e.running) {
      await e.running;
      return newer();
    }
    if (newer()) return newer(); // another request's 401 replaced it already
    if (e.lastForcedAt !== undefined && this.#now() < e.lastForcedAt + e.ttlMs) return undefined;
    e.lastForcedAt = this.#now();
    e.running = this.#start(e);
    await e.running;
    return newer();
  }

  /** Forgets commands `keep` does not name (a reload removed them); seen values stay. */
  retain(keep: readonly CommandRef[]): void {
    const names = new Set(keep.map((r) => JSON.stringify(r.argv)));
    for (const k of [...this.#entries.keys()]) if (!names.has(k)) this.#entries.delete(k);
  }

  /** Each command's state, in the order first used. */
  status(): SourceStatus[] {
    const now = this.#now();
    return [...this.#entries.values()].map((e) => {
      const until = e.value
        ? e.obtainedAt + e.ttlMs * (e.failingSince !== undefined ? 2 : 1)
        : undefined;
      const inForce = until !== undefined && now < until;
      return {
        program: e.argv[0] ?? "",
        state: e.running
          ? "refreshing"
          : e.failingSince !== undefined
          ? "failing"
          : inForce
          ? "ok"
          : "idle",
        ttlMs: e.ttlMs,
        runs: e.runs,
        expiresAt: inForce ? until : null,
        failingSince: e.failingSince ?? null,
        error: e.error ?? null,
      };
    });
  }

  /** The fresh value, or the last good one for one ttl past its expiry, or the failure. */
  #serve(e: Entry): Secret {
    const now = this.#now();
    if (e.value && now < e.obtainedAt + e.ttlMs) return e.value;
    if (e.value && e.failingSince !== undefined && now < e.obtainedAt + 2 * e.ttlMs) {
      return e.value;
    }
    const name = e.argv[0] ?? "";
    throw new IsbError(
      "operation_failed",
      `get ${this.#what} with "${name}": ${e.error ?? "its value expired"}`,
    );
  }

  async #start(e: Entry): Promise<void> {
    const started = this.#now();
    e.lastRunAt = started;
    e.runs++;
    try {
      const v = await this.#once(e.argv);
      e.value = v;
      e.obtainedAt = started;
      delete e.failingSince;
      delete e.error;
      if (!this.#seen.some((s) => s.equals(v))) this.#seen.push(v);
    } catch (err) {
      e.failingSince ??= started;
      e.error = (err as Error).message;
      log.warn("proxy: credential command failed", { program: e.argv[0] ?? "", error: e.error });
    } finally {
      delete e.running;
    }
  }

  async #once(argv: readonly string[]): Promise<Secret> {
    let got;
    try {
      got = await this.#run(argv, { timeoutMs: COMMAND_TIMEOUT_MS, maxBytes: COMMAND_MAX_BYTES });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        throw new IsbError("operation_failed", "command not found");
      }
      if (e instanceof Deno.errors.NotCapable || e instanceof Deno.errors.PermissionDenied) {
        throw new IsbError(
          "operation_failed",
          "the proxy may not run it (docs/proxy.md: credential commands)",
        );
      }
      throw new IsbError("operation_failed", "it could not start");
    }
    if (got.timedOut) {
      throw new IsbError("operation_failed", `no answer within ${COMMAND_TIMEOUT_MS / 1000} s`);
    }
    if (got.tooLong) {
      throw new IsbError("operation_failed", `it printed more than ${COMMAND_MAX_BYTES} bytes`);
    }
    if (got.code !== 0) {
      throw new IsbError(
        "operation_failed",
        `it exited with code ${got.code}; run it yourself to see why`,
      );
    }
    const text = new TextDecoder().decode(got.stdout).trim();
    if (text === "") throw new IsbError("operation_failed", "it printed nothing");
    if (!/^[\x21-\x7e]+$/.test(text)) {
      throw new IsbError("operation_failed", "it printed more than one printable word");
    }
    return new Secret(text);
  }
}
