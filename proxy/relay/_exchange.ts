/**
 * One admitted request of the intercepting relay (proxy/relay/relay.ts) and its response: the
 * request goes out on a kept-alive upstream connection of the instance (sent once more on a
 * fresh one when a kept-alive upstream closed under an idempotent request without a body),
 * and the response comes back scrubbed, read for usage and counted. A 401 to a request whose
 * credential comes from a command is answered by one more try with a newer value when the
 * command gives one (proxy/callers/admit.ts), if the whole request is at hand to send again:
 * no body, or a body of at most {@link REPLAY_LIMIT} bytes, kept as it went out (a longer
 * one gets the 401, and the refreshed value serves its next try). Apart from the
 * connection loop so that each file holds one concern; the call ends exactly once.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import type { ConnReader } from "../http1/conn_reader.ts";
import {
  connectionTokens,
  type Framing,
  type RequestHead,
  requestHeadBytes,
  responseFraming,
  type ResponseHead,
  responseHeadBytes,
} from "../http1/http1.ts";
import {
  type BodyWriter,
  type KeptBody,
  prefetchBody,
  pumpRequest,
  pumpResponse,
  readFinalHead,
  UNANSWERED,
  writeAll,
} from "./_body.ts";
import { scrubText } from "./rewrite.ts";
import { Scrubber } from "./scrub.ts";
import type { Admission } from "../callers/admit.ts";
import type { ModelCall, TrafficCall } from "../activity/counter.ts";
import type { Lease, UpstreamPool } from "./upstream_pool.ts";
import { bodyKind, UsageReader } from "../activity/usage.ts";
import { DecodingUsageReader } from "../http1/decode.ts";
import { bodyPlan, DecodingSink, guestResponseHeaders } from "./_decoded.ts";
import type { Deadline, ProxyLimits } from "../callers/limits.ts";

/** The largest request body kept to send again after a 401 (command-sourced credentials). */
export const REPLAY_LIMIT = 2 * 1024 * 1024;

/** Methods a request may be sent again for (RFC 9110 §9.2.2), when it has no body. */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"]);

/** The guest connection's side of an exchange (a relay session). */
export interface ExchangeSide {
  /** The guest's connection. */
  guest: Deno.Conn;
  /** Its reader, past the request head. */
  g: ConnReader;
  /** Kept-alive upstream connections. */
  pool: UpstreamPool;
  /** The session's reusable response body writer. */
  writer: BodyWriter;
  /** Timeouts. */
  limits: ProxyLimits;
  /** Answers from the proxy itself and closes the guest connection. */
  refuse(status: number, text: string): Promise<false>;
  /** Closes the guest connection. */
  close(): void;
  /** The connection's timer (the stream idle deadline while an exchange runs; its `kick` is a
   * reader's `onData`). */
  deadline: Deadline;
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

/** The message of a thrown value. */
export function message(e: unknown): string {
  return String((e as Error)?.message ?? e);
}

/** Relays one admitted request and its response; the call ends exactly once. */
export async function exchange(
  s: ExchangeSide,
  req: RequestHead,
  framing: Framing,
  a: Extract<Admission, { kind: "relay" }>,
  instance: string,
): Promise<boolean> {
  const call: Call = { ended: false, responded: false, reader: undefined };
  const { origin } = a;
  let up: Lease | undefined;
  try {
    // The body's framing is checked (a small body whole) before any upstream connection.
    s.deadline.set(s.limits.streamIdleMs, s.close);
    s.g.onData = s.deadline.kick;
    const body = await prefetchBody(s.g, framing, {
      expectContinue: /\b100-continue\b/i.test(req.headers.get("expect") ?? ""),
    }).finally(() => {
      s.deadline.clear();
      s.g.onData = undefined;
    });
    if (body === "bad") return await s.refuse(400, "malformed chunked request body");
    if (body === "short") return false;
    try {
      up = await s.pool.acquire(
        `${instance}|${origin.secure}|${origin.hostname}|${origin.port}`,
        origin,
      );
    } catch (e) {
      endCall(a, call);
      const why = scrubText(message(e), a.secrets);
      log.warn("proxy: upstream unreachable", { host: origin.authority, error: why });
      return await s.refuse(502, `upstream ${origin.authority} unreachable: ${why}`);
    }
    const lease = up;
    return await forward(s, req, framing, a, call, {
      lease: () => lease,
      renew: async () => (up = await s.pool.acquire(lease.key, origin, { fresh: true })),
      abort: () => up && s.pool.discard(up),
    });
  } catch (e) {
    if (up) s.pool.discard(up);
    throw e;
  } finally {
    endCall(a, call);
  }
}

/** Sends the request on the lease and relays the response back. */
async function forward(
  s: ExchangeSide,
  req: RequestHead,
  framing: Framing,
  a: Extract<Admission, { kind: "relay" }>,
  call: Call,
  on: { lease(): Lease; renew(): Promise<Lease>; abort(): void },
): Promise<boolean> {
  const up = on.lease();
  // Nothing moving either way for the stream timeout: the exchange is given up.
  s.deadline.set(s.limits.streamIdleMs, () => {
    on.abort();
    s.close();
  });
  const kick = s.deadline.kick;
  s.g.onData = up.reader.onData = kick;
  try {
    return await relay(s, req, framing, a, call, on, up, kick);
  } finally {
    s.deadline.clear();
    // Only our own hooks: a released upstream may already serve another guest.
    if (s.g.onData === kick) s.g.onData = undefined;
    if (up.reader.onData === kick) up.reader.onData = undefined;
  }
}

/** Sends the request head and body, then delivers the response (or a 502). */
async function relay(
  s: ExchangeSide,
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
  // Only a request that may be sent again after a 401 keeps a copy of its body.
  const keep: KeptBody | undefined = a.refresh
    ? { limit: REPLAY_LIMIT, chunks: [], size: 0, over: false }
    : undefined;
  const pumped = pumpRequest(s.g, up.conn, {
    framing,
    head,
    sent: (n) => traffic.sent(n),
    ...(keep ? { keep } : {}),
  }).then(
    (ok) => (sent = ok ? "done" : "short"),
    () => (sent = "failed"),
  );
  void pumped.then(() => {
    // The guest stopped mid-body: the upstream would wait for the rest forever.
    if (sent === "short") return abort();
    // Request in: a read on the guest's connection notices it going away.
    if (sent === "done" && !finished && !s.g.full) {
      void s.g.fill().then((more) => !more && !finished && abort());
    }
  });
  const interim = (bytes: Uint8Array) => writeAll(s.guest, bytes);
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
  if (typeof res !== "string" && res.status === 401 && a.refresh) {
    res = await retryAuthorized(a, res, {
      keep: keep!,
      pumped: pumped.then(() => sent === "done"),
      send: async (headers) => {
        abort();
        up = await on.renew();
        up.reader.onData = kick;
        headers.set("host", origin.authority);
        if (framing.kind === "chunked") headers.set("transfer-encoding", "chunked");
        const again = requestHeadBytes(req.method, req.target, headers);
        const all = new Uint8Array(again.length + keep!.size);
        all.set(again);
        let at = again.length;
        for (const c of keep!.chunks) (all.set(c, at), at += c.length);
        await writeAll(up.conn, all);
        return await readFinalHead(up.reader, { secrets: a.secrets, traffic, interim });
      },
    });
  }
  // The upstream cannot give this request a usable answer: the guest gets 502.
  const fail = (why: string) => {
    finished = true;
    abort();
    end();
    log.warn("proxy: upstream failed", { host: origin.authority, error: why });
    return s.refuse(502, `upstream ${origin.authority} failed: ${why}`);
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
  s.writer.begin(
    { guest: s.guest, scrub, reader: call.reader, traffic, chunked },
    responseHeadBytes(res.status, scrubText(res.reason, a.secrets), headers),
  );
  const sink = plan.kind === "decode" ? new DecodingSink(s.writer, plan.codings) : s.writer;
  const complete = await pumpResponse(up.reader, rf, sink).catch(() => false);
  finished = true;
  end();
  const reusable = complete && sent === "done" && res.minor === 1 && rf.kind !== "close" &&
    !connectionTokens(res.headers).has("close");
  if (up.reader.onData === kick) up.reader.onData = undefined;
  if (reusable) s.pool.release(up);
  else abort();
  return complete && sent === "done" && !guestCloses;
}

/**
 * After a 401 to a request with a command-sourced credential: the source is refreshed (at
 * most one run per ttl), and when it gives a newer value and the whole request was sent and
 * kept, the request goes once more with it and its answer is the one the guest gets.
 */
async function retryAuthorized(
  a: Extract<Admission, { kind: "relay" }>,
  first: ResponseHead,
  o: {
    keep: KeptBody;
    pumped: Promise<boolean>;
    send: (headers: Headers) => Promise<ResponseHead | string>;
  },
): Promise<ResponseHead | string> {
  const refreshed = a.refresh!();
  // Not all of the body is at hand: the guest gets this 401, its next try the newer value.
  if (o.keep.over || !(await o.pumped) || o.keep.over) {
    void refreshed.catch(() => {});
    return first;
  }
  const headers = await refreshed.catch(() => undefined);
  if (!headers) return first;
  log.info("proxy: sent again with a refreshed credential after 401", {
    host: a.origin.authority,
  });
  try {
    return await o.send(headers);
  } catch (e) {
    return message(e);
  }
}
