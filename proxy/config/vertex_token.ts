/**
 * Vertex access tokens from a configured command (by default `gcloud auth
 * print-access-token`): run without a shell (the argv comes from credentials.yaml as a
 * list), with stdin closed, bounded in time (30 s) and output (64 KiB), trimmed and
 * required non-empty and printable; then cached per command until its TTL passes. One run
 * at a time per command: concurrent calls share it. A failure is not cached, and its
 * message never carries the command's output (it may hold a token); stderr is not read
 * at all.
 *
 * The I/O edge is {@link RunCommand}, so the cache and the checks are tested with a fake
 * runner and the real runner with a real process.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";
import type { VertexConfig } from "./credentials.ts";
import { Secret } from "./secret.ts";

/** How long the token command may run. */
export const TOKEN_TIMEOUT_MS = 30_000;
/** The most output the token command may print. */
export const TOKEN_MAX_BYTES = 64 * 1024;

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
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
  }, limits.timeoutMs);
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of child.stdout) {
      size += chunk.length;
      if (size > limits.maxBytes) {
        tooLong = true;
        try {
          child.kill("SIGKILL");
        } catch { /* exited */ }
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

/** Tokens per command, cached until their TTL passes. */
export class VertexTokens {
  readonly #run: RunCommand;
  readonly #now: () => number;
  readonly #cache = new Map<string, { token: Secret; until: number }>();
  readonly #pending = new Map<string, Promise<Secret>>();
  readonly #seen: Secret[] = [];

  /** Creates it with a runner and a clock. */
  constructor(opts: { run?: RunCommand; now?: () => number } = {}) {
    this.#run = opts.run ?? runCommand;
    this.#now = opts.now ?? Date.now;
  }

  /** Every token handed out so far (what responses and errors are scrubbed of). */
  secrets(): Secret[] {
    return [...this.#seen];
  }

  /** Forgets this account's cached token (Vertex answered 401 with it). */
  invalidate(config: VertexConfig): void {
    this.#cache.delete(JSON.stringify(config.tokenCommand));
  }

  /** A token for this account: cached, or from one run of its command. */
  get(config: VertexConfig): Promise<Secret> {
    const key = JSON.stringify(config.tokenCommand);
    const hit = this.#cache.get(key);
    if (hit && hit.until > this.#now()) return Promise.resolve(hit.token);
    const running = this.#pending.get(key);
    if (running) return running;
    const p = this.#fetch(config).then((token) => {
      this.#cache.set(key, { token, until: this.#now() + config.tokenTtlMs });
      if (!this.#seen.some((s) => s.equals(token))) this.#seen.push(token);
      return token;
    }).finally(() => this.#pending.delete(key));
    this.#pending.set(key, p);
    return p;
  }

  async #fetch(config: VertexConfig): Promise<Secret> {
    const name = config.tokenCommand[0] ?? "";
    const fail = (why: string) =>
      new IsbError("operation_failed", `get a Vertex access token with "${name}": ${why}`);
    let got;
    try {
      got = await this.#run(config.tokenCommand, {
        timeoutMs: TOKEN_TIMEOUT_MS,
        maxBytes: TOKEN_MAX_BYTES,
      });
    } catch (e) {
      throw fail(e instanceof Deno.errors.NotFound ? "command not found" : "it could not start");
    }
    if (got.timedOut) throw fail(`no answer within ${TOKEN_TIMEOUT_MS / 1000} s`);
    if (got.tooLong) throw fail(`it printed more than ${TOKEN_MAX_BYTES} bytes`);
    if (got.code !== 0) throw fail(`it exited with code ${got.code}; run it yourself to see why`);
    const token = new TextDecoder().decode(got.stdout).trim();
    if (token === "") throw fail("it printed nothing");
    if (!/^[\x21-\x7e]+$/.test(token)) throw fail("it printed more than one printable word");
    return new Secret(token);
  }
}
