/**
 * `isb rpc`: the SDK protocol as line-delimited JSON over a pair of byte streams
 * (shared/spec/isb-rpc.md §2). A session looks like this (`<-` server, `->` client):
 *
 * ```
 * <- {"isb":"0.1.0","protocol":1}
 * -> {"id":2,"method":"sandbox.exec","params":{"name":"web","argv":["cat"],"stdin":"piped","stream":true}}
 * -> {"id":3,"method":"exec.write","params":{"exec":2,"data":"aGkK"}}
 * <- {"id":3,"result":null}
 * -> {"id":4,"method":"exec.close_stdin","params":{"exec":2}}
 * <- {"id":4,"result":null}
 * <- {"id":2,"event":"stdout","data":"aGkK"}
 * <- {"id":2,"result":{"exit_code":0}}
 * ```
 *
 * This module is only the skin: it writes the hello line before reading anything, splits
 * the input into lines, answers lines that are not requests with `bad_request`, looks the
 * method up in the method table (`methods/mod.ts`, whose groups are each imported on the first
 * call of one of their methods; the table and the engine are loaded after the hello: the
 * client does not wait for them to get its hello, only a request does, and `version` and
 * `schema` wait for no engine), and writes
 * each request's events and its one final reply. Every request runs concurrently, except
 * `exec.*`, which runs inline on the reader in arrival order so a control call never queues
 * behind the exec it controls; a `sandbox.exec` is registered as pending the moment its
 * line is read. Every output line is one complete JSON object written with a single write
 * through one writer, so lines never interleave. On input EOF the server stops reading,
 * waits for the requests in flight, closes the output and resolves.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import {
  type ByteReader,
  type ByteWriter,
  encodeLine,
  type LineOutput,
  lineOutput,
  lines,
} from "../jsonl.ts";
import { moduleUrl } from "../prebuilt.ts";
import { log } from "../log.ts";
import { execKey, ExecRegistry, type ExecSlot } from "../sandbox/exec/registry.ts";
import { PROTOCOL, VERSION } from "../version.ts";
import { type CallContext, type EventName, type Handler, toWire } from "./dispatch.ts";

export type { CallContext, EventName, Handler } from "./dispatch.ts";
export type { ControlOp, ExecControl, ExecRegistry, ExecSlot } from "../sandbox/exec/registry.ts";

/** The method handlers by method name (each group types its own engine, the sandbox Engine). */
// deno-lint-ignore no-explicit-any -- each group types its own engine (the sandbox Engine)
export type MethodTable = Readonly<Record<string, Handler<any>>>;
let registered: MethodTable | undefined;

/** Hands over the method table imported statically (by the guest bundle, `cli/bundle.ts`). */
export function registerMethods(methods: MethodTable): void {
  registered = methods;
}

/**
 * The method table (`methods/mod.ts`), imported on first use: it builds every params schema,
 * most of the server's start-up, so {@link serveRpc} loads it after writing the hello. By a
 * computed specifier: Deno reads every statically analyzable import's graph (here the whole
 * engine) before the program starts, which cost the hello ~7 ms (issue 11, start-up).
 * `scripts/compile.ts` embeds the module; a bundle registers it ({@link registerMethods}).
 */
export async function loadMethods(): Promise<MethodTable> {
  if (registered) return registered;
  const source = new URL("./methods/mod.ts", import.meta.url).href;
  return (await import(moduleUrl("rpc/server/methods/mod.ts", source))).METHODS;
}

/** The hello line's object, which `version` answers too. */
export function hello(): { isb: string; protocol: number } {
  return { isb: VERSION, protocol: PROTOCOL };
}

/** What {@link serveRpc} needs: its streams, the engine, and optionally other methods. */
export interface ServeRpcOptions<Engine> {
  /** Request lines (the process's stdin itself: no web stream to set up). */
  input: ReadableStream<Uint8Array> | ByteReader;
  /** Reply and event lines (the process's stdout). A stream is closed when the server ends. */
  output: WritableStream<Uint8Array> | ByteWriter;
  /** The sandbox engine every handler gets (or give {@link ServeRpcOptions.makeEngine}). */
  engine?: Engine;
  /** Makes the engine, once, after the hello is written (when `engine` is absent). */
  makeEngine?: () => Promise<Engine>;
  /** The method table; {@link loadMethods}'s when absent (tests pass their own). */
  methods?: Readonly<Record<string, Handler<Engine>>>;
}

/** Serves requests from `input` until it ends and every request is answered. */
export async function serveRpc<Engine>(opts: ServeRpcOptions<Engine>): Promise<void> {
  const out = new LineWriter(opts.output);
  const execs = new ExecRegistry();
  const inflight = new Set<Promise<void>>();
  await out.send(hello()); // the first line, before any input is read
  // the method table and the engine, made while the client reads its hello
  const methodsReady = opts.methods
    ? Promise.resolve(opts.methods)
    : (loadMethods() as Promise<Record<string, Handler<Engine>>>);
  const engineReady = opts.engine !== undefined
    ? Promise.resolve(opts.engine)
    : makeEngine(opts.makeEngine);
  // a failure is answered to each request below
  methodsReady.catch(() => {});
  engineReady.catch(() => {});
  try {
    for await (const line of lines(opts.input)) {
      if (line.trim() === "") continue;
      const req = parseRequest(line);
      if (req instanceof IsbError) {
        void out.send({ id: null, error: toWire(req) });
        continue;
      }
      const key = execKey(req.id);
      // the method's group and, unless it is engine-free, the engine: awaited in the request's
      // own task, so a request that needs neither is not held behind one that does
      const prepare = async (): Promise<CallReady<Engine>> => {
        const methods = await methodsReady;
        const handler = Object.hasOwn(methods, req.method) ? methods[req.method] : undefined;
        // version and schema (engine-free) and an unknown method are answered without it
        const engine = handler && !handler.engineFree ? await engineReady : undefined;
        const ctx: CallContext<Engine> = {
          id: req.id,
          key,
          emit: (event: EventName, data: unknown) => out.send({ id: req.id, event, data }),
          get engine(): Engine {
            if (engine === undefined) throw new TypeError(`${req.method} is engine-free`);
            return engine;
          },
          execs,
        };
        return { handler, ctx };
      };
      if (req.method.startsWith("exec.")) {
        await answer(out, prepare, req); // inline, in arrival order
        continue;
      }
      const slot = req.method === "sandbox.exec" ? execs.register(key) : undefined;
      const done = answer(out, prepare, req, slot).finally(() => inflight.delete(done));
      inflight.add(done);
    }
  } catch (e) {
    log.warn("rpc: reading requests failed; finishing", { error: String(e) });
  }
  while (inflight.size > 0) await Promise.all(inflight);
  await out.close();
}

function makeEngine<Engine>(make: (() => Promise<Engine>) | undefined): Promise<Engine> {
  if (!make) throw new TypeError("serveRpc needs engine or makeEngine");
  return make();
}

interface Request {
  id: unknown;
  method: string;
  params: unknown;
}

/** Decodes one line as a request, or returns the `bad_request` error. */
function parseRequest(line: string): Request | IsbError {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (e) {
    return badRequest(e instanceof Error ? e.message : String(e));
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return badRequest(`invalid type: expected an object, got ${jsonType(value)}`);
  }
  const r = value as Record<string, unknown>;
  if (!("method" in r)) return badRequest("missing field `method`");
  if (typeof r.method !== "string") {
    return badRequest(`invalid type for \`method\`: expected a string, got ${jsonType(r.method)}`);
  }
  return { id: r.id ?? null, method: r.method, params: r.params ?? null };
}

function badRequest(detail: string): IsbError {
  return new IsbError("bad_request", `not a request: ${detail}`);
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

/** A request's handler (absent: an unknown method) and its context, engine included. */
interface CallReady<Engine> {
  handler: Handler<Engine> | undefined;
  ctx: CallContext<Engine>;
}

/**
 * Runs one request and writes its final reply (events were written by the handler); a
 * failure to load its group or to make the engine is its error reply.
 */
async function answer<Engine>(
  out: LineWriter,
  prepare: () => Promise<CallReady<Engine>>,
  req: Request,
  slot?: ExecSlot,
): Promise<void> {
  let reply: Record<string, unknown>;
  try {
    const { handler, ctx } = await prepare();
    if (!handler) {
      throw new IsbError("protocol", `protocol: unknown method ${JSON.stringify(req.method)}`);
    }
    const result = await handler(req.params, ctx);
    reply = { id: req.id, result: result ?? null };
  } catch (e) {
    reply = { id: req.id, error: toWire(e) };
  } finally {
    slot?.finish(); // a failed or finished exec takes no more control calls
  }
  await out.send(reply);
}

/** One writer for the whole output: each line is one write of one complete JSON object. */
class LineWriter {
  #writer: LineOutput;
  #encoder = new TextEncoder();
  #broken = false;

  constructor(output: WritableStream<Uint8Array> | ByteWriter) {
    this.#writer = lineOutput(output);
  }

  /** Queues one line; settles when it is written (or dropped because the output broke). */
  send(value: unknown): Promise<void> {
    if (this.#broken) return Promise.resolve();
    let text: string;
    try {
      text = encodeLine(value);
    } catch (e) {
      const id = (value as { id?: unknown }).id ?? null;
      const error = toWire(new IsbError("json", `encode reply: ${(e as Error).message}`));
      text = encodeLine({ id, error });
    }
    return this.#writer.write(this.#encoder.encode(text)).catch((e) => {
      if (!this.#broken) log.warn("rpc: output closed; dropping lines", { error: String(e) });
      this.#broken = true;
    });
  }

  /** Closes the output once every queued line is written. */
  async close(): Promise<void> {
    try {
      await this.#writer.close();
    } catch { /* already broken */ }
  }
}
