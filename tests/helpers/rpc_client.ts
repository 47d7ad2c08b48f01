/**
 * A small `isb rpc` client over a spawned program, for process tests and benchmarks: it
 * reads stdout lines in the background, checks each is JSON, and routes events and replies
 * to the request with that id, so concurrent calls are matched the way the SDKs match them.
 *
 * @module
 */

import { type ProgramHandle, type SpawnOptions, spawnProgram } from "./spawn.ts";

/** One line of output. */
export type Line = Record<string, unknown>;

/** An event or final reply of one request. */
export interface Reply {
  events: { event: string; data: unknown }[];
  result?: unknown;
  error?: { code: string; message: string; data?: Record<string, unknown> };
}

interface Pending {
  reply: Reply;
  done: (r: Reply) => void;
  onEvent?: (event: string, data: unknown) => void;
}

/** A client bound to one running `isb rpc`. */
export class RpcClient implements AsyncDisposable {
  /** The process. */
  readonly program: ProgramHandle;
  /** The hello line. */
  hello: Line | undefined;
  #pending = new Map<string, Pending>();
  #nextId = 1;
  #reading: Promise<void>;
  #ready: Promise<void>;
  /** Lines that were not JSON (must stay empty). */
  readonly junk: string[] = [];

  constructor(program: ProgramHandle) {
    this.program = program;
    let ready!: () => void;
    this.#ready = new Promise((r) => (ready = r));
    this.#reading = (async () => {
      for (;;) {
        const line = await program.readLine(600_000).catch(() => undefined);
        if (line === undefined) break;
        let l: Line;
        try {
          l = JSON.parse(line);
        } catch {
          this.junk.push(line);
          continue;
        }
        if (!this.hello) {
          this.hello = l;
          ready();
          continue;
        }
        const p = this.#pending.get(JSON.stringify(l.id));
        if (!p) continue;
        if ("event" in l) {
          p.reply.events.push({ event: String(l.event), data: l.data });
          p.onEvent?.(String(l.event), l.data);
          continue;
        }
        this.#pending.delete(JSON.stringify(l.id));
        if ("error" in l) p.reply.error = l.error as NonNullable<Reply["error"]>;
        else p.reply.result = l.result;
        p.done(p.reply);
      }
      ready();
    })();
  }

  /** Starts `isb rpc` with `args` before `rpc` (e.g. `--socket`). */
  static start(args: string[] = [], opts: SpawnOptions = {}): Promise<RpcClient> {
    const c = new RpcClient(spawnProgram([...args, "rpc"], opts));
    return c.#ready.then(() => c);
  }

  /** A fresh numeric id. */
  nextId(): number {
    return this.#nextId++;
  }

  /** Sends a request and resolves with its events and final reply. */
  call(
    method: string,
    params?: unknown,
    opts: { id?: unknown; onEvent?: (event: string, data: unknown) => void } = {},
  ): Promise<Reply> {
    const id = opts.id ?? this.nextId();
    const reply: Reply = { events: [] };
    const done = new Promise<Reply>((resolve) => {
      this.#pending.set(JSON.stringify(id), {
        reply,
        done: resolve,
        ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
      });
    });
    void this.program.send({ id, method, ...(params === undefined ? {} : { params }) });
    return done;
  }

  /** Like {@link call} but throws on an error reply; returns the result. */
  async ok(method: string, params?: unknown): Promise<unknown> {
    const r = await this.call(method, params);
    if (r.error) throw new Error(`${method}: ${JSON.stringify(r.error)}`);
    return r.result;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.program.closeStdin();
    await this.program[Symbol.asyncDispose]();
    await this.#reading;
  }
}

/** Base64 text of bytes or a string. */
export function b64(data: string | Uint8Array): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}

/** Bytes of base64 text. */
export function unb64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** The concatenated text of a reply's `stdout` (or `stderr`) events. */
export function streamText(r: Reply, stream = "stdout"): string {
  const parts = r.events.filter((e) => e.event === stream).map((e) => unb64(String(e.data)));
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) all.set(p, at), at += p.length;
  return new TextDecoder().decode(all);
}
