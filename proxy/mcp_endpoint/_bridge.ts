/**
 * MCP's HTTP transport for one coordinator, relayed to its `isx mcp --caller-instance`
 * child over stdio: the one module that frames HTTP exchanges as JSON-RPC lines and back
 * (docs/decisions.md "A coordinator's isx mcp over HTTP: the proxy relays to a stdio
 * child"). The child is the same stdio server a host agent starts, so every tool, limit,
 * refusal and audit line is the same; this module only carries messages.
 *
 * Both eras, as on stdio:
 * - 2025-11-25 Streamable HTTP. `POST` carries one message. A request is answered as JSON,
 *   or as an event stream when the client accepts `text/event-stream` (then the call's
 *   progress notifications come first, and a comment every 30 s keeps the stream alive).
 *   A notification or response is answered 202. `initialize` starts a new session: the
 *   previous child is ended (TERM, KILL after 10 s) and a new one started, and the answer
 *   carries `Mcp-Session-Id`; every later request must present it (an unknown or ended one
 *   gets 404: initialize again). `GET` opens the stream of server notifications not tied to
 *   a request (`notifications/isx/task_changed` for a client that opted in); `DELETE` ends
 *   the session.
 * - 2026-07-28 stateless: a `POST` without `Mcp-Session-Id` is self-contained (its `_meta`
 *   names the version and client), and goes to the coordinator's child, started if none
 *   runs; `subscriptions/listen` is answered as an event stream that carries the
 *   subscription's notifications until it is cancelled or the session ends.
 *
 * Request ids are renumbered on the way in (the child sees one id space, whoever sent the
 * request) and restored on the way out; `notifications/cancelled` is renumbered with them.
 * A client that goes away mid-call does not cancel it (as the transport says): the call
 * finishes in the child, its answer is dropped, and what it made is held by the session,
 * which is the instance, for the next connection to find.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import type { ChildSpec, McpChild } from "./_child.ts";
import { spawnChild } from "./_child.ts";

type Json = Record<string, unknown>;
type Id = string | number;

/** Options of a {@link Bridge}. */
export interface BridgeOptions {
  /** How to start the child. */
  spec: ChildSpec;
  /** Starts the child (default {@link spawnChild}; tests pass their own). */
  spawn?: typeof spawnChild;
  /** Keep-alive comment period on event streams (default 30 s). */
  keepAliveMs?: number;
  /** TERM → KILL grace when a child is replaced or ended (default 10 s). */
  stopGraceMs?: number;
}

/** Where one request's answer (and its notifications) go. */
interface Sink {
  /** A notification for this request. */
  event(msg: Json): void;
  /** The answer; the sink is finished. */
  done(msg: Json): void;
}

interface Pending {
  clientId: Id;
  sink: Sink;
  token?: string;
  listen: boolean;
}

const SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId";
const enc = new TextEncoder();

function rpcError(id: Id | null, code: number, message: string): Json {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

function plain(status: number, text: string): Response {
  return new Response(`isx-proxy: ${text}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-isx-proxy": "1" },
  });
}

/** An event stream: messages as `event: message`, a comment every `keepAliveMs`. */
class EventStream {
  readonly body: ReadableStream<Uint8Array>;
  #ctl!: ReadableStreamDefaultController<Uint8Array>;
  #timer: ReturnType<typeof setInterval>;
  #open = true;
  readonly #onClose: () => void;

  constructor(keepAliveMs: number, onClose: () => void) {
    this.#onClose = onClose;
    this.body = new ReadableStream<Uint8Array>({
      start: (ctl) => {
        this.#ctl = ctl;
      },
      cancel: () => this.#end(false),
    });
    this.#timer = setInterval(() => this.#write(": keep-alive\n\n"), keepAliveMs);
  }

  get open(): boolean {
    return this.#open;
  }

  send(msg: Json): void {
    this.#write(`event: message\ndata: ${JSON.stringify(msg)}\n\n`);
  }

  close(): void {
    this.#end(true);
  }

  #write(text: string): void {
    if (!this.#open) return;
    try {
      this.#ctl.enqueue(enc.encode(text));
    } catch {
      this.#end(false);
    }
  }

  #end(closeCtl: boolean): void {
    if (!this.#open) return;
    this.#open = false;
    clearInterval(this.#timer);
    if (closeCtl) {
      try {
        this.#ctl.close();
      } catch { /* already closed */ }
    }
    this.#onClose();
  }
}

const keyOf = (id: unknown) => JSON.stringify(id);

/** One coordinator's MCP over HTTP, relayed to its child. */
export class Bridge {
  readonly name: string;
  readonly grant: string;
  readonly #o: Required<Omit<BridgeOptions, "spec">> & { spec: ChildSpec };
  #child: McpChild | undefined;
  #session: string | undefined;
  #nextId = 1;
  #pending = new Map<number, Pending>();
  #byClientId = new Map<string, number>();
  #byToken = new Map<string, number>();
  #streams = new Set<EventStream>();
  /** Serialises child starts and stops. */
  #turn: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(name: string, grant: string, o: BridgeOptions) {
    this.name = name;
    this.grant = grant;
    this.#o = {
      spec: o.spec,
      spawn: o.spawn ?? spawnChild,
      keepAliveMs: o.keepAliveMs ?? 30_000,
      stopGraceMs: o.stopGraceMs ?? 10_000,
    };
  }

  /** The running child's pid, if one runs. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Answers one HTTP exchange of this coordinator. */
  async handle(req: Request): Promise<Response> {
    const session = req.headers.get("mcp-session-id");
    if (req.method === "GET") return this.#get(req, session);
    if (req.method === "DELETE") return await this.#delete(session);
    if (req.method !== "POST") {
      return plain(405, `${req.method} is not part of MCP's HTTP transport (POST, GET, DELETE)`);
    }
    let msg: unknown;
    try {
      msg = JSON.parse(await req.text());
    } catch {
      return jsonResponse(400, rpcError(null, -32700, "parse error: the body is not JSON"));
    }
    if (Array.isArray(msg)) {
      return jsonResponse(
        400,
        rpcError(null, -32600, "invalid request: batches are not supported"),
      );
    }
    if (!msg || typeof msg !== "object") {
      return jsonResponse(400, rpcError(null, -32600, "invalid request: not a JSON-RPC object"));
    }
    const m = msg as Json;
    const hasId = typeof m.id === "string" || typeof m.id === "number";
    const method = typeof m.method === "string" ? m.method : undefined;
    const extra: Record<string, string> = {};
    if (method === "initialize" && hasId) {
      const id = await this.#restart();
      extra["mcp-session-id"] = id;
    } else if (session !== null) {
      if (session !== this.#session || !this.#child) {
        return plain(404, "no such MCP session (it ended or was replaced): initialize again");
      }
    } else if (method && hasId) {
      // stateless (2026-07-28): self-contained; the coordinator's child serves it
      await this.#ensureChild();
    }
    if (!method) return await this.#forwardAnswer(m);
    if (!hasId) return await this.#forwardNotification(method, m);
    const sse = (req.headers.get("accept") ?? "").includes("text/event-stream");
    return await this.#forwardRequest(m, method, sse, extra);
  }

  /** Ends the child and every stream (the proxy stops, or the coordinator is gone). */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#serial(() => this.#stopChild("the proxy stopped serving this coordinator"));
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const next = this.#turn.then(f, f);
    this.#turn = next.catch(() => {});
    return next;
  }

  /** A new handshake session: the old child ended, a new one started; its session id. */
  #restart(): Promise<string> {
    return this.#serial(async () => {
      await this.#stopChild("a new initialize replaced this session");
      this.#startChild();
      const id = crypto.randomUUID();
      this.#session = id;
      return id;
    });
  }

  #ensureChild(): Promise<void> {
    return this.#serial(() => {
      if (!this.#child) this.#startChild();
      return Promise.resolve();
    });
  }

  #startChild(): void {
    if (this.#closed) throw new IsbError("io", "the proxy is stopping");
    const child = this.#o.spawn(this.#o.spec, this.name, (msg) => this.#fromChild(child, msg));
    this.#child = child;
    log.info("proxy: started isx mcp for a coordinator", { instance: this.name, pid: child.pid });
    void child.exited.then(() => {
      if (this.#child !== child) return;
      this.#child = undefined;
      this.#session = undefined;
      this.#failAll("isx mcp for this coordinator ended: initialize again");
      log.info("proxy: isx mcp for a coordinator ended", { instance: this.name, pid: child.pid });
    });
  }

  async #stopChild(why: string): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    this.#session = undefined;
    this.#failAll(why);
    if (child) await child.stop(this.#o.stopGraceMs);
  }

  #failAll(why: string): void {
    for (const [, p] of this.#pending) p.sink.done(rpcError(p.clientId, -32603, why));
    this.#pending.clear();
    this.#byClientId.clear();
    this.#byToken.clear();
    for (const s of this.#streams) s.close();
    this.#streams.clear();
  }

  #fromChild(child: McpChild, msg: Json): void {
    if (this.#child !== child) return;
    const method = typeof msg.method === "string" ? msg.method : undefined;
    if (!method) {
      const id = typeof msg.id === "number" ? msg.id : undefined;
      const p = id === undefined ? undefined : this.#pending.get(id);
      if (!p) return; // the client went away, or the call was cancelled
      this.#pending.delete(id!);
      this.#byClientId.delete(keyOf(p.clientId));
      if (p.token) this.#byToken.delete(p.token);
      p.sink.done({ ...msg, id: p.clientId });
      return;
    }
    if (msg.id !== undefined) {
      // isx mcp sends no requests to its client; one would have no one to answer it
      log.debug("proxy: dropped a request from isx mcp", { instance: this.name, method });
      return;
    }
    const params = (msg.params && typeof msg.params === "object" ? msg.params : {}) as Json;
    if (method === "notifications/progress") {
      const id = this.#byToken.get(keyOf(params.progressToken));
      const p = id === undefined ? undefined : this.#pending.get(id);
      p?.sink.event(msg);
      return;
    }
    const meta = (params._meta && typeof params._meta === "object" ? params._meta : {}) as Json;
    if (typeof meta[SUBSCRIPTION] === "number") {
      const p = this.#pending.get(meta[SUBSCRIPTION] as number);
      if (!p) return;
      p.sink.event({
        ...msg,
        params: { ...params, _meta: { ...meta, [SUBSCRIPTION]: p.clientId } },
      });
      return;
    }
    for (const s of this.#streams) s.send(msg);
  }

  async #send(msg: Json): Promise<boolean> {
    const child = this.#child;
    if (!child) return false;
    try {
      await child.send(msg);
      return true;
    } catch {
      return false;
    }
  }

  async #forwardAnswer(m: Json): Promise<Response> {
    // isx mcp asks its client nothing, so an answer from the client has no taker
    void m;
    return await Promise.resolve(new Response(null, { status: 202 }));
  }

  async #forwardNotification(method: string, m: Json): Promise<Response> {
    let msg = m;
    if (method === "notifications/cancelled") {
      const params = (m.params && typeof m.params === "object" ? m.params : {}) as Json;
      const id = this.#byClientId.get(keyOf(params.requestId));
      if (id === undefined) return new Response(null, { status: 202 });
      msg = { ...m, params: { ...params, requestId: id } };
      const p = this.#pending.get(id);
      // a cancelled call is never answered; a cancelled subscription ends its stream
      if (p) {
        this.#pending.delete(id);
        this.#byClientId.delete(keyOf(p.clientId));
        if (p.token) this.#byToken.delete(p.token);
        p.sink.done({});
      }
    }
    await this.#send(msg);
    return new Response(null, { status: 202 });
  }

  async #forwardRequest(
    m: Json,
    method: string,
    sse: boolean,
    headers: Record<string, string>,
  ): Promise<Response> {
    const clientId = m.id as Id;
    const id = this.#nextId++;
    const params = (m.params && typeof m.params === "object" ? m.params : undefined) as
      | Json
      | undefined;
    const meta = (params?._meta && typeof params._meta === "object" ? params._meta : {}) as Json;
    const token = meta.progressToken !== undefined ? keyOf(meta.progressToken) : undefined;
    const listen = method === "subscriptions/listen";
    if (listen && !sse) {
      return jsonResponse(
        406,
        rpcError(clientId, -32600, "subscriptions/listen is answered as an event stream only"),
      );
    }
    let response: Response;
    let sink: Sink;
    if (sse) {
      const stream = new EventStream(this.#o.keepAliveMs, () => {});
      sink = {
        event: (msg) => stream.send(msg),
        done: (msg) => {
          if (Object.keys(msg).length) stream.send(msg);
          stream.close();
        },
      };
      response = new Response(stream.body, {
        status: 200,
        headers: {
          "content-type": "text/event-stream",
          "cache-control": "no-cache",
          ...headers,
        },
      });
    } else {
      let resolve!: (msg: Json) => void;
      const answered = new Promise<Json>((r) => (resolve = r));
      sink = {
        event: () => {},
        done: (msg) =>
          resolve(Object.keys(msg).length ? msg : rpcError(clientId, -32800, "request cancelled")),
      };
      response = new Response(
        new ReadableStream<Uint8Array>({
          async start(ctl) {
            ctl.enqueue(enc.encode(JSON.stringify(await answered)));
            ctl.close();
          },
        }),
        { status: 200, headers: { "content-type": "application/json", ...headers } },
      );
    }
    this.#pending.set(id, { clientId, sink, listen, ...(token ? { token } : {}) });
    this.#byClientId.set(keyOf(clientId), id);
    if (token) this.#byToken.set(token, id);
    if (!(await this.#send({ ...m, id }))) {
      this.#pending.delete(id);
      this.#byClientId.delete(keyOf(clientId));
      if (token) this.#byToken.delete(token);
      sink.done(rpcError(clientId, -32603, "isx mcp for this coordinator is not running"));
    }
    return response;
  }

  #get(req: Request, session: string | null): Response {
    if (!(req.headers.get("accept") ?? "").includes("text/event-stream")) {
      return plain(406, "GET opens an event stream: accept text/event-stream");
    }
    if (session === null) {
      return plain(405, "GET needs an Mcp-Session-Id (stateless clients use subscriptions/listen)");
    }
    if (session !== this.#session || !this.#child) {
      return plain(404, "no such MCP session (it ended or was replaced): initialize again");
    }
    const stream: EventStream = new EventStream(
      this.#o.keepAliveMs,
      () => this.#streams.delete(stream),
    );
    this.#streams.add(stream);
    return new Response(stream.body, {
      status: 200,
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }

  async #delete(session: string | null): Promise<Response> {
    if (session === null || session !== this.#session) {
      return plain(404, "no such MCP session (it ended or was replaced): initialize again");
    }
    await this.#serial(() => this.#stopChild("the client ended the session"));
    return new Response(null, { status: 204 });
  }
}
