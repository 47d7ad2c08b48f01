/**
 * The intercepting relay: the proxy's hot path. TLS from guests is terminated by
 * `Deno.listenTls` (ALPN `http/1.1`); each HTTP/1.1 request head is read and parsed here,
 * decided on by {@link admit} (the same checks, routes and counters as the `Deno.serve`
 * handler), rewritten, and written to a kept-alive upstream connection of the same
 * instance; the body follows as bytes. The response head is parsed and rewritten, and its
 * body relayed through one reusable buffer: scrubbed in place, read for usage on model
 * calls, counted (a body compressed despite `Accept-Encoding: identity` is decoded first,
 * or read from a decoded copy: proxy/relay/_decoded.ts; one exchange: proxy/relay/_exchange.ts). Measured against `Deno.serve` + `fetch` this does a fraction of the work
 * per byte (no stream machinery, no copies, no re-chunking by two HTTP stacks); see
 * docs/decisions.md and bench/proxy_bench.ts.
 *
 * What the relay does not speak itself it hands, connection and all, to the `Deno.serve`
 * handler on a loopback port (the caller passed along by source port, as for CONNECT):
 * upgrades (WebSockets), HTTP/1.0, request targets that are not origin-form, and model
 * calls translated for Vertex AI (which need the whole body). A request
 * whose framing is ambiguous gets 400, one whose head is over 64 KiB 431. A call ends
 * exactly once: when its response is delivered, or when either side goes away (a read on
 * the guest's connection watches for that while the response is pending).
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { closeQuietly } from "../host/accept.ts";
import type { Handoff } from "../callers/handoff.ts";
import { ConnReader } from "../http1/conn_reader.ts";
import { pipeConns } from "./forward.ts";
import { answerBytes, parseRequestHead, requestFraming } from "../http1/http1.ts";
import { BodyWriter, writeAll } from "./_body.ts";
import { hostOnly } from "../config/policy.ts";
import { admit, callerOf, type InterceptDeps } from "../callers/admit.ts";
import type { UpstreamPool } from "./upstream_pool.ts";
import { Deadline, DEFAULT_LIMITS, type ProxyLimits } from "../callers/limits.ts";
import { exchange, type ExchangeSide, message } from "./_exchange.ts";
import { MCP_HOST } from "../mcp_endpoint/mod.ts";

/** How long a refused guest gets to finish sending before its connection closes. */
const LINGER_MS = 1_000;

/** What the relay needs beyond the handler's dependencies. */
export interface RelayDeps extends InterceptDeps {
  /** Loopback port of the plain-HTTP `Deno.serve` handler that takes what the relay won't. */
  slowPort: number;
  /** Callers of handed-over loopback connections (shared with that handler). */
  handoff: Handoff;
  /** Test and benchmark only: CA certificates trusted for upstream TLS. */
  upstreamCaCerts?: string[];
}

/** One guest connection, request after request. */
class Session {
  readonly #guest: Deno.Conn;
  readonly #g: ConnReader;
  readonly #deps: RelayDeps;
  readonly #pool: UpstreamPool;
  readonly #writer = new BodyWriter();
  readonly #limits: ProxyLimits;
  readonly #stopping: AbortSignal | undefined;
  readonly #side: ExchangeSide;
  /** The connection's one timer: keep-alive, head, body and stream deadlines in turn. */
  readonly #deadline = new Deadline();
  readonly #closer = () => this.#close();

  constructor(guest: Deno.Conn, deps: RelayDeps, pool: UpstreamPool, stopping?: AbortSignal) {
    this.#guest = guest;
    this.#g = new ConnReader(guest);
    this.#deps = deps;
    this.#pool = pool;
    this.#limits = deps.limits ?? DEFAULT_LIMITS;
    this.#stopping = stopping;
    this.#side = {
      guest,
      g: this.#g,
      pool,
      writer: this.#writer,
      limits: this.#limits,
      refuse: (status, text) => this.#refuse(status, text),
      close: this.#closer,
      deadline: this.#deadline,
    };
  }

  /** Closes the connection unless `p` settles within `ms`. */
  async #within<T>(ms: number, p: Promise<T>): Promise<T> {
    this.#deadline.set(ms, this.#closer);
    try {
      return await p;
    } finally {
      this.#deadline.clear();
    }
  }

  async run(): Promise<void> {
    try {
      for (let first = true;; first = false) {
        // Kept alive: the next request's first byte within the keep-alive timeout, then
        // its whole head within the header timeout (the first one's from the accept); a
        // head that came whole with its first byte has nothing left to time.
        if (!first && this.#g.buffered === 0) {
          if (!(await this.#within(this.#limits.keepAliveMs, this.#g.fill()))) return;
        }
        const got = this.#g.bufferedHead() ??
          await this.#within(this.#limits.headerTimeoutMs, this.#g.head());
        if ("end" in got) return;
        if ("tooLarge" in got) return void (await this.#refuse(431, "request head too large"));
        if (!(await this.#request(got.text))) return;
      }
    } catch (e) {
      log.debug("proxy: relay connection failed", { error: message(e) });
    } finally {
      this.#deadline.stop();
      // A guest that stopped reading must not keep the close_notify (and us) waiting.
      const timer = setTimeout(() => this.#close(), LINGER_MS);
      await this.#guest.closeWrite().catch(() => {});
      clearTimeout(timer);
      this.#close();
    }
  }

  #close(): void {
    closeQuietly(this.#guest);
  }

  /** Answers from the proxy itself and closes, letting the guest finish sending first. */
  async #refuse(status: number, text: string): Promise<false> {
    const timer = setTimeout(() => this.#close(), LINGER_MS);
    try {
      await writeAll(this.#guest, answerBytes(status, text));
      await this.#guest.closeWrite();
      while (await this.#g.fill()) this.#g.consume(this.#g.buffered);
    } catch {
      /* the guest went away */
    } finally {
      clearTimeout(timer);
    }
    return false;
  }

  /** Handles one request; true when the connection may carry another. */
  async #request(text: string): Promise<boolean> {
    const req = parseRequestHead(text);
    if (typeof req === "string") return await this.#refuse(400, req);
    if (
      req.minor === 0 || req.headers.has("upgrade") || !req.target.startsWith("/") ||
      req.method === "CONNECT"
    ) {
      await this.#handOver(text);
      return false;
    }
    const framing = requestFraming(req.headers);
    if (typeof framing === "string") return await this.#refuse(400, framing);
    const authority = req.headers.get("host");
    if (!authority) return await this.#refuse(400, "missing Host header");
    // isx mcp for coordinators (proxy/mcp_endpoint/) streams: the `Deno.serve` handler's job
    if (this.#deps.mcp && hostOnly(authority) === MCP_HOST) {
      await this.#handOver(text);
      return false;
    }
    // A call to translate for Vertex needs its whole body: the `Deno.serve` handler's job.
    if (this.#deps.policy.translates(hostOnly(authority), req.target)) {
      await this.#handOver(text);
      return false;
    }
    const caller = await callerOf(
      this.#deps,
      this.#guest.remoteAddr as Deno.NetAddr,
      (this.#guest.localAddr as Deno.NetAddr).port,
    );
    const a = await admit(this.#deps, caller, {
      method: req.method,
      authority,
      pathAndQuery: req.target,
      headers: req.headers,
      headBytes: text.length,
    });
    if (a.kind === "answer") return await this.#refuse(a.status, a.message);
    return await exchange(this.#side, req, framing, a, `${caller!.name}|${caller!.incarnation}`);
  }

  /** Gives the connection to the `Deno.serve` handler, starting with this head. */
  async #handOver(text: string): Promise<void> {
    const caller = await callerOf(
      this.#deps,
      this.#guest.remoteAddr as Deno.NetAddr,
      (this.#guest.localAddr as Deno.NetAddr).port,
    );
    if (!caller) return void (await this.#refuse(403, "this address belongs to no instance"));
    const inner = await Deno.connect({ hostname: "127.0.0.1", port: this.#deps.slowPort });
    const local = (inner.localAddr as Deno.NetAddr).port;
    this.#deps.handoff.set(this.#deps.slowPort, local, caller);
    try {
      const first = new Uint8Array(text.length + this.#g.buffered);
      for (let i = 0; i < text.length; i++) first[i] = text.charCodeAt(i);
      first.set(this.#g.view(), text.length);
      this.#g.consume(this.#g.buffered);
      await writeAll(inner, first);
      await pipeConns(this.#guest, inner, {
        idleMs: this.#limits.streamIdleMs,
        signal: this.#stopping,
      });
    } finally {
      this.#deps.handoff.delete(this.#deps.slowPort, local);
    }
  }
}

/** Relays one guest connection (TLS is terminated on its first read) until it ends. */
export function relayConnection(
  conn: Deno.Conn,
  deps: RelayDeps,
  pool: UpstreamPool,
  stopping?: AbortSignal,
): Promise<void> {
  return new Session(conn, deps, pool, stopping).run();
}
