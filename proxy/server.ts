/**
 * The intercepting HTTP handler: what runs for every request a guest sends to an
 * intercepted domain after TLS is terminated (shared/spec/isx-mcp.md §7).
 *
 * Order per request: find the calling instance (source address; unknown → 403, counted
 * nowhere), check the Host is one DNS sends here (else 421), check an
 * `X-Isx-Instance-Secret` if one is presented (must belong to that same instance; else
 * 403), ask the policy (a pin to a missing account → 502, fail closed), then relay: request
 * head with credentials injected and `Accept-Encoding: identity` (so bodies can be read and
 * scrubbed), response head and body scrubbed of every real value, bytes counted both ways,
 * model-call usage read from 2xx bodies. The call ends exactly once, when Deno reports the
 * response delivered or the client gone; an upstream that cannot be reached gives 502 and
 * no response is counted. WebSocket upgrades get the same injection and count as one
 * request in flight while open.
 *
 * @module
 */

import { log } from "../rpc/mod.ts";
import type { Caller, CallerLookup } from "./clients.ts";
import type { ActivityCounter, ModelCall, TrafficCall } from "./counter.ts";
import { hostOnly, type Policy } from "./policy.ts";
import {
  applyHeaderOps,
  forwardableHeaders,
  type HeaderOp,
  INSTANCE_SECRET_HEADER,
  responseHeaders,
  scrubText,
} from "./rewrite.ts";
import { Scrubber } from "./scrub.ts";
import { constantTimeEqual, type Secret } from "./secret.ts";
import { bodyKind, UsageReader } from "./usage.ts";
import { isLoopback, type UpstreamOrigin, upstreamOrigin, upstreamUrl } from "./upstream.ts";
import type { ModelProvider } from "./activity.ts";
import { relayWebSocket } from "./websocket.ts";

/** Per-caller additions from isb egress secrets. */
export interface EgressLookup {
  /** True when `host` is allowed for this caller by its egress secrets. */
  covers(caller: Caller, host: string): boolean;
  /** Placeholder substitutions for this caller on this host. */
  ops(caller: Caller, host: string): HeaderOp[];
  /** Every egress secret value (for scrubbing). */
  secrets(): Secret[];
}

/** What the handler needs. */
export interface InterceptDeps {
  policy: Policy;
  clients: CallerLookup;
  counter: ActivityCounter;
  /** Test-only loopback origins per host (validated by `checkOverrides`). */
  overrides: ReadonlyMap<string, string>;
  egress?: EgressLookup;
  /** Callers of connections the forward proxy handed over, by their loopback source port. */
  handoff?: ReadonlyMap<number, Caller>;
  /** The HTTP client for upstream requests (default: Deno's). */
  httpClient?: Deno.HttpClient;
}

/** A short plain-text answer from the proxy itself. */
export function proxyText(status: number, message: string): Response {
  return new Response(`isx-proxy: ${message}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-isx-proxy": "1" },
  });
}

async function sha256Hex(text: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** True when a presented instance secret belongs to this caller (constant-time compare). */
export async function secretMatches(caller: Caller, presented: string): Promise<boolean> {
  if (!caller.secretSha256) return false;
  return constantTimeEqual(await sha256Hex(presented.trim()), caller.secretSha256);
}

/** Resolves the caller of a connection, including handed-over CONNECT tunnels. */
export async function callerOf(
  deps: Pick<InterceptDeps, "clients" | "handoff">,
  remote: Deno.NetAddr,
): Promise<Caller | undefined> {
  if (deps.handoff && isLoopback(remote.hostname)) {
    const handed = deps.handoff.get(remote.port);
    if (handed) return handed;
  }
  return await deps.clients.identify(remote);
}

function headBytes(method: string, target: string, headers: Headers): number {
  let n = method.length + target.length + 12;
  for (const [k, v] of headers) n += k.length + v.length + 4;
  return n + 2;
}

function counting(onBytes: (n: number) => void): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, ctl) {
      onBytes(chunk.length);
      ctl.enqueue(chunk);
    },
  });
}

/** The response body: scrubbed, counted, and read for usage on the way to the guest. */
function relayBody(
  body: ReadableStream<Uint8Array>,
  opts: { traffic: TrafficCall; reader: UsageReader | undefined; secrets: readonly Secret[] },
): ReadableStream<Uint8Array> {
  const scrub = Scrubber.of(opts.secrets);
  const { traffic, reader } = opts;
  let held: Uint8Array = new Uint8Array(0);
  const emit = (chunk: Uint8Array, final: boolean, ctl: TransformStreamDefaultController) => {
    const buf = held.length ? new Uint8Array(held.length + chunk.length) : chunk;
    if (held.length) {
      buf.set(held);
      buf.set(chunk, held.length);
    }
    const n = scrub.scan(buf, buf.length, final);
    held = buf.subarray(n);
    if (n === 0) return;
    reader?.push(buf.subarray(0, n));
    traffic.received(n);
    ctl.enqueue(buf.subarray(0, n));
  };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, ctl) => emit(chunk, false, ctl),
      flush: (ctl) => emit(new Uint8Array(0), true, ctl),
    }),
  );
}

/** One intercepted request as the servers see it, before any decision. */
export interface RequestFacts {
  method: string;
  /** The `Host` header (or URL authority): `host[:port]`. */
  authority: string;
  /** Path and query as sent. */
  pathAndQuery: string;
  /** The guest's request headers. */
  headers: Headers;
  /** Bytes of the request head as received (counted as sent). */
  headBytes: number;
}

/** What to do with one request: answer it here, or relay it with these settings. */
export type Admission =
  | { kind: "answer"; status: number; message: string }
  | {
    kind: "relay";
    origin: UpstreamOrigin;
    /** The upstream URL (for `fetch`). */
    target: string;
    /** Request headers for upstream: credentials injected, hop-by-hop headers dropped. */
    headers: Headers;
    traffic: TrafficCall;
    model: ModelCall | undefined;
    provider: ModelProvider | undefined;
    /** Every real value (for scrubbing). */
    secrets: Secret[];
    websocket: boolean;
  };

/**
 * The decision for one request of `caller` (undefined: nobody's): the checks, the route,
 * the counters started, the upstream head built. Answers are not counted as responses.
 */
export async function admit(
  deps: InterceptDeps,
  caller: Caller | undefined,
  req: RequestFacts,
): Promise<Admission> {
  const answer = (status: number, message: string) => ({
    kind: "answer" as const,
    status,
    message,
  });
  if (!caller) return answer(403, "this address belongs to no instance");
  const m = /^(?:\[[0-9a-fA-F:.]+\]|[^\s/?#@:[\]]+)(?::(\d{1,5}))?$/.exec(req.authority);
  if (!m) return answer(400, "malformed Host header");
  const host = hostOnly(req.authority);
  const egressHost = deps.egress?.covers(caller, host) ?? false;
  if (!deps.policy.covers(host) && !egressHost) {
    return answer(421, `"${host}" is not intercepted here`);
  }
  const presented = req.headers.get(INSTANCE_SECRET_HEADER);
  if (presented !== null && !(await secretMatches(caller, presented))) {
    return answer(403, "the instance secret does not belong to the calling instance");
  }
  const path = req.pathAndQuery.split("?")[0]!;
  const route = deps.policy.route({ host, path }, caller.pins);
  const websocket = req.headers.get("upgrade")?.toLowerCase() === "websocket";
  const traffic = deps.counter.traffic(caller, { websocket });
  traffic.sent(req.headBytes);
  if (route.kind === "fail") {
    traffic.end();
    log.warn("proxy: failing closed", { instance: caller.name, host, reason: route.message });
    return answer(route.status, route.message);
  }
  const secrets = [...deps.policy.secrets(), ...(deps.egress?.secrets() ?? [])];
  const headers = forwardableHeaders(req.headers);
  applyHeaderOps(headers, [...route.ops, ...(deps.egress?.ops(caller, host) ?? [])]);
  const port = m[1] ? Number(m[1]) : undefined;
  const where = { host, ...(port ? { port } : {}) };
  const origin = upstreamOrigin(where, deps.overrides);
  const target = upstreamUrl({ ...where, pathAndQuery: req.pathAndQuery }, deps.overrides);
  if (!websocket) headers.set("accept-encoding", "identity");
  const model = route.model && !websocket ? deps.counter.modelCall(caller) : undefined;
  return {
    kind: "relay",
    origin,
    target,
    headers,
    traffic,
    model,
    provider: route.model,
    secrets,
    websocket,
  };
}

/** The `Deno.serve` handler for intercepted requests (TLS already terminated). */
export function interceptHandler(
  deps: InterceptDeps,
): (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => Promise<Response> {
  return async (req, info) => {
    const caller = await callerOf(deps, info.remoteAddr);
    const url = new URL(req.url);
    const pathAndQuery = url.pathname + url.search;
    const a = await admit(deps, caller, {
      method: req.method,
      authority: url.host,
      pathAndQuery,
      headers: req.headers,
      headBytes: headBytes(req.method, pathAndQuery, req.headers),
    });
    if (a.kind === "answer") return proxyText(a.status, a.message);
    if (a.websocket) {
      return relayWebSocket(req, {
        target: a.target,
        headers: a.headers,
        traffic: a.traffic,
        secrets: a.secrets,
        ...(deps.httpClient ? { client: deps.httpClient } : {}),
      });
    }
    return await relay(req, info, {
      target: a.target,
      headers: a.headers,
      traffic: a.traffic,
      model: a.model,
      secrets: a.secrets,
      deps,
      provider: a.provider,
    });
  };
}

async function relay(
  req: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  o: {
    target: string;
    headers: Headers;
    traffic: TrafficCall;
    model: ModelCall | undefined;
    secrets: Secret[];
    deps: InterceptDeps;
    provider: "anthropic" | "openai" | undefined;
  },
): Promise<Response> {
  const { traffic, model } = o;
  // Aborts the upstream exchange when the guest goes away before the response is delivered.
  const gone = new AbortController();
  info.completed.catch(() => gone.abort());
  let upstream: Response;
  try {
    const body = req.body?.pipeThrough(counting((n) => traffic.sent(n))) ?? null;
    upstream = await fetch(o.target, {
      method: req.method,
      headers: o.headers,
      body,
      redirect: "manual",
      signal: gone.signal,
      ...(o.deps.httpClient ? { client: o.deps.httpClient } : {}),
    });
  } catch (e) {
    model?.end({ responded: false });
    traffic.end();
    const why = scrubText(String((e as Error)?.message ?? e), o.secrets);
    const host = new URL(o.target).host;
    log.warn("proxy: upstream unreachable", { host, error: why });
    return proxyText(502, `upstream ${host} unreachable: ${why}`);
  }
  traffic.responded();
  const headers = responseHeaders(upstream.headers, o.secrets);
  traffic.received(headBytes("HTTP/1.1", String(upstream.status), headers));
  const readable = upstream.status >= 200 && upstream.status < 300 && o.provider !== undefined &&
    !upstream.headers.get("content-encoding")?.replace(/identity/i, "").trim();
  const kind = readable ? bodyKind(upstream.headers.get("content-type")) : undefined;
  const reader = model && o.provider && kind ? new UsageReader(o.provider, kind) : undefined;
  const finish = () => {
    model?.end({ responded: true, ...(reader ? { usage: reader.finish() } : {}) });
    traffic.end();
  };
  if (!upstream.body || req.method === "HEAD") {
    await upstream.body?.cancel();
    info.completed.then(finish, finish);
    return new Response(null, {
      status: upstream.status,
      statusText: upstream.statusText,
      headers,
    });
  }
  info.completed.then(finish, finish);
  const body = relayBody(upstream.body, { traffic, reader, secrets: o.secrets });
  return new Response(body, { status: upstream.status, statusText: upstream.statusText, headers });
}
