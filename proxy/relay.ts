/**
 * The intercepting relay: the proxy's hot path. TLS from guests is terminated by
 * `Deno.listenTls` (ALPN `http/1.1`); each HTTP/1.1 request head is read and parsed here,
 * decided on by {@link admit} (the same checks, routes and counters as the `Deno.serve`
 * handler), rewritten, and written to a kept-alive upstream connection of the same
 * instance; the body follows as bytes. The response head is parsed and rewritten, and its
 * body relayed through one reusable buffer: scrubbed in place, read for usage on model
 * calls, counted (a body compressed despite `Accept-Encoding: identity` is decoded first,
 * or read from a decoded copy: proxy/relay_decode.ts). Measured against `Deno.serve` + `fetch` this does a fraction of the work
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

import { log } from "../rpc/base.ts";
import type { Handoff } from "./handoff.ts";
import { ConnReader } from "./conn_reader.ts";
import { pipeConns } from "./forward.ts";
import {
  answerBytes,
  connectionTokens,
  type Framing,
  parseRequestHead,
  requestFraming,
  type RequestHead,
  requestHeadBytes,
  responseFraming,
  responseHeadBytes,
} from "./http1.ts";
import {
  BodyWriter,
  pumpRequest,
  pumpResponse,
  readFinalHead,
  UNANSWERED,
  writeAll,
} from "./relay_body.ts";
import { scrubText } from "./rewrite.ts";
import { hostOnly } from "./policy.ts";
import { Scrubber } from "./scrub.ts";
import { type Admission, admit, callerOf, type InterceptDeps } from "./admit.ts";
import type { ModelCall, TrafficCall } from "./counter.ts";
import type { Lease, UpstreamPool } from "./upstream_pool.ts";
import { bodyKind, UsageReader } from "./usage.ts";
import { DecodingUsageReader } from "./decode.ts";
import { bodyPlan, DecodingSink, guestResponseHeaders } from "./relay_decode.ts";
import { DEFAULT_LIMITS, type ProxyLimits, Watchdog } from "./limits.ts";

/** How long a refused guest gets to finish sending before its connection closes. */
const LINGER_MS = 1_000;

/** Methods a request may be sent again for (RFC 9110 §9.2.2), when it has no body. */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"]);

/** What the relay needs beyond the handler's dependencies. */
export interface RelayDeps extends InterceptDeps {
  /** Loopback port of the plain-HTTP `Deno.serve` handler that takes what the relay won't. */
  slowPort: number;
  /** Callers of handed-over loopback connections (shared with that handler). */
  handoff: Handoff;
  /** Test and benchmark only: CA certificates trusted for upstream TLS. */
  upstreamCaCerts?: string[];
}

/** How one call went, for ending it exactly once. */
interface Call {
  ended: boolean;
  /** A response head arrived. */
  responded: boolean;
  /** The model call's usage reader, once the response is being read. */
  reader: UsageReader | DecodingUsageReader | undefined;
}

function endCall(a: { model: ModelCall | undefined; traffic: TrafficCall }, call: Call): void {
  if (call.ended) return;
  call.ended = true;
  const { responded } = call;
  const usage = call.reader?.finish();
  a.traffic.end();
  // A decoded copy may still be catching up: the model call ends when it has.
  if (usage instanceof Promise) void usage.then((u) => a.model?.end({ responded, usage: u }));
  else a.model?.end({ responded, ...(usage ? { usage } : {}) });
}

function message(e: unknown): string {
  return String((e as Error)?.message ?? e);
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

  constructor(guest: Deno.Conn, deps: RelayDeps, pool: UpstreamPool, stopping?: AbortSignal) {
    this.#guest = guest;
    this.#g = new ConnReader(guest);
    this.#deps = deps;
    this.#pool = pool;
    this.#limits = deps.limits ?? DEFAULT_LIMITS;
    this.#stopping = stopping;
  }

  /** Closes the connection unless `p` settles within `ms`. */
  #within<T>(ms: number, p: Promise<T>): Promise<T> {
    const timer = setTimeout(() => this.#close(), ms);
    return p.finally(() => clearTimeout(timer));
  }

  async run(): Promise<void> {
    try {
      for (let first = true;; first = false) {
        // Kept alive: the next request's first byte within the keep-alive timeout, then
        // its whole head within the header timeout (the first one's from the accept).
        if (!first && this.#g.buffered === 0) {
          if (!(await this.#within(this.#limits.keepAliveMs, this.#g.fill()))) return;
        }
        const got = await this.#within(this.#limits.headerTimeoutMs, this.#g.head());
        if ("end" in got) return;
        if ("tooLarge" in got) return void (await this.#refuse(431, "request head too large"));
        if (!(await this.#request(got.text))) return;
      }
    } catch (e) {
      log.debug("proxy: relay connection failed", { error: message(e) });
    } finally {
      // A guest that stopped reading must not keep the close_notify (and us) waiting.
      const timer = setTimeout(() => this.#close(), LINGER_MS);
      await this.#guest.closeWrite().catch(() => {});
      clearTimeout(timer);
      this.#close();
    }
  }

  #close(): void {
    try {
      this.#guest.close();
    } catch { /* already closed */ }
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
    return await this.#exchange(req, framing, a, `${caller!.name}|${caller!.incarnation}`);
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

  /** Relays one admitted request and its response; the call ends exactly once. */
  async #exchange(
    req: RequestHead,
    framing: Framing,
    a: Extract<Admission, { kind: "relay" }>,
    instance: string,
  ): Promise<boolean> {
    const call: Call = { ended: false, responded: false, reader: undefined };
    const { origin } = a;
    let up: Lease | undefined;
    try {
      try {
        up = await this.#pool.acquire(
          `${instance}|${origin.secure}|${origin.hostname}|${origin.port}`,
          origin,
        );
      } catch (e) {
        endCall(a, call);
        const why = scrubText(message(e), a.secrets);
        log.warn("proxy: upstream unreachable", { host: origin.authority, error: why });
        return await this.#refuse(502, `upstream ${origin.authority} unreachable: ${why}`);
      }
      const lease = up;
      return await this.#forward(req, framing, a, call, {
        lease: () => lease,
        renew: async () => (up = await this.#pool.acquire(lease.key, origin, { fresh: true })),
        abort: () => up && this.#pool.discard(up),
      });
    } catch (e) {
      if (up) this.#pool.discard(up);
      throw e;
    } finally {
      endCall(a, call);
    }
  }

  /** Sends the request on the lease and relays the response back. */
  async #forward(
    req: RequestHead,
    framing: Framing,
    a: Extract<Admission, { kind: "relay" }>,
    call: Call,
    on: { lease(): Lease; renew(): Promise<Lease>; abort(): void },
  ): Promise<boolean> {
    const up = on.lease();
    // Nothing moving either way for the stream timeout: the exchange is given up.
    const dog = new Watchdog(this.#limits.streamIdleMs, () => {
      on.abort();
      this.#close();
    });
    const kick = () => dog.kick();
    this.#g.onData = up.reader.onData = kick;
    try {
      return await this.#relay(req, framing, a, call, on, up, kick);
    } finally {
      dog.stop();
      // Only our own hooks: a released upstream may already serve another guest.
      if (this.#g.onData === kick) this.#g.onData = undefined;
      if (up.reader.onData === kick) up.reader.onData = undefined;
    }
  }

  async #relay(
    req: RequestHead,
    framing: Framing,
    a: Extract<Admission, { kind: "relay" }>,
    call: Call,
    on: { lease(): Lease; renew(): Promise<Lease>; abort(): void },
    first: Lease,
    kick: () => void,
  ): Promise<boolean> {
    const { traffic, origin } = a;
    const end = () => endCall(a, call);
    const abort = on.abort;
    let up = first;
    a.headers.set("host", origin.authority);
    if (framing.kind === "chunked") a.headers.set("transfer-encoding", "chunked");
    const head = requestHeadBytes(req.method, req.target, a.headers);
    let finished = false;
    let sent: "done" | "short" | "failed" | undefined;
    void pumpRequest(this.#g, up.conn, { framing, head, sent: (n) => traffic.sent(n) }).then(
      (ok) => (sent = ok ? "done" : "short"),
      () => (sent = "failed"),
    ).then(() => {
      // The guest stopped mid-body: the upstream would wait for the rest forever.
      if (sent === "short") return abort();
      // Request in: a read on the guest's connection notices it going away.
      if (sent === "done" && !finished && !this.#g.full) {
        void this.#g.fill().then((more) => !more && !finished && abort());
      }
    });
    const interim = (bytes: Uint8Array) => writeAll(this.#guest, bytes);
    let res = await readFinalHead(up.reader, { secrets: a.secrets, traffic, interim });
    if (
      res === UNANSWERED && !up.fresh && framing.kind === "none" && IDEMPOTENT.has(req.method)
    ) {
      // A kept-alive upstream closed just as the request went out: once more on a new one.
      abort();
      try {
        up = await on.renew();
        up.reader.onData = kick;
        await writeAll(up.conn, head);
        res = await readFinalHead(up.reader, { secrets: a.secrets, traffic, interim });
      } catch (e) {
        res = message(e);
      }
    }
    // The upstream cannot give this request a usable answer: the guest gets 502.
    const fail = (why: string) => {
      finished = true;
      abort();
      end();
      log.warn("proxy: upstream failed", { host: origin.authority, error: why });
      return this.#refuse(502, `upstream ${origin.authority} failed: ${why}`);
    };
    if (typeof res === "string") return await fail(res);
    traffic.responded();
    call.responded = true;
    const rf = responseFraming(req.method, res.status, res.headers);
    if (typeof rf === "string") return await fail(rf);
    const scrub = Scrubber.of(a.secrets);
    const plan = bodyPlan(res.headers.get("content-encoding"), {
      body: rf.kind !== "none",
      scrubbing: !scrub.empty,
    });
    if (plan.kind === "refuse") return await fail(plan.reason);
    const guestCloses = connectionTokens(req.headers).has("close");
    const { headers, chunked } = guestResponseHeaders(res.headers, {
      secrets: a.secrets,
      rechunk: rf.kind === "chunked" || rf.kind === "close",
      plan,
      close: guestCloses,
    });
    const readable = res.status >= 200 && res.status < 300 && a.provider !== undefined &&
      plan.kind !== "opaque";
    const kind = readable ? bodyKind(res.headers.get("content-type")) : undefined;
    const usage = a.model && a.provider && kind ? new UsageReader(a.provider, kind) : undefined;
    call.reader = usage && plan.kind === "copy"
      ? new DecodingUsageReader(usage, plan.codings)
      : usage;
    this.#writer.begin(
      { guest: this.#guest, scrub, reader: call.reader, traffic, chunked },
      responseHeadBytes(res.status, scrubText(res.reason, a.secrets), headers),
    );
    const sink = plan.kind === "decode"
      ? new DecodingSink(this.#writer, plan.codings)
      : this.#writer;
    const complete = await pumpResponse(up.reader, rf, sink).catch(() => false);
    finished = true;
    end();
    const reusable = complete && sent === "done" && res.minor === 1 && rf.kind !== "close" &&
      !connectionTokens(res.headers).has("close");
    if (up.reader.onData === kick) up.reader.onData = undefined;
    if (reusable) this.#pool.release(up);
    else abort();
    return complete && sent === "done" && !guestCloses;
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
