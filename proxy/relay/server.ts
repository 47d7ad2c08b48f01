/**
 * The intercepting `Deno.serve` handler: what the relay (proxy/relay/relay.ts) hands over, a
 * connection at a time, because it does not speak it itself: WebSocket upgrades,
 * HTTP/1.0, request targets that are not origin-form (shared/spec/isx-mcp.md §7).
 *
 * The decision is {@link admit}'s, as for the relay. Then: request head with credentials
 * injected and `Accept-Encoding: identity` sent with `fetch`, response head and body
 * scrubbed of every real value, bytes counted both ways, model-call usage read from 2xx
 * bodies (a body compressed anyway is handled as in the relay: proxy/relay/_decoded.ts). The call ends exactly once, when Deno reports the response delivered or the
 * client gone; an upstream that cannot be reached gives 502 and no response is counted.
 * WebSocket upgrades get the same injection and count as one request in flight while
 * open.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { admit, callerOf, type InterceptDeps } from "../callers/admit.ts";
import type { ModelCall, TrafficCall } from "../activity/counter.ts";
import { responseHeaders, scrubText } from "./rewrite.ts";
import { Scrubber } from "./scrub.ts";
import type { Secret } from "../config/secret.ts";
import { bodyKind, UsageReader } from "../activity/usage.ts";
import { decodeStream, DecodingUsageReader } from "../http1/decode.ts";
import { bodyPlan } from "./_decoded.ts";
import { relayWebSocket } from "./_websocket.ts";
import { MCP_HOST } from "../mcp_endpoint/mod.ts";
import { upstreamUrl } from "./upstream.ts";
import { MAX_TRANSLATED_BODY, NOT_FOR_VERTEX, translateMessages } from "../config/vertex.ts";

/** A short plain-text answer from the proxy itself. */
export function proxyText(status: number, message: string): Response {
  return new Response(`isx-proxy: ${message}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-isx-proxy": "1" },
  });
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
  opts: {
    traffic: TrafficCall;
    reader: Pick<UsageReader, "push"> | undefined;
    secrets: readonly Secret[];
  },
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

/** The `Deno.serve` handler for intercepted requests (TLS already terminated) on `port()`. */
export function interceptHandler(
  deps: InterceptDeps,
  port: () => number,
): (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => Promise<Response> {
  return async (req, info) => {
    const caller = await callerOf(deps, info.remoteAddr, port());
    const url = new URL(req.url);
    if (deps.mcp && url.hostname === MCP_HOST) return await deps.mcp.handle(req, caller);
    const pathAndQuery = url.pathname + url.search;
    const a = await admit(deps, caller, {
      method: req.method,
      authority: url.host,
      pathAndQuery,
      headers: req.headers,
      headBytes: headBytes(req.method, pathAndQuery, req.headers),
    });
    if (a.kind === "answer") return proxyText(a.status, a.message);
    // On an egress bridge every real upstream is reached through the guarded connector.
    const client = a.origin.overridden ? deps.httpClient : deps.guardedClient ?? deps.httpClient;
    if (a.websocket) {
      return relayWebSocket(req, {
        target: a.target,
        headers: a.headers,
        traffic: a.traffic,
        secrets: a.secrets,
        ...(client ? { client } : {}),
      });
    }
    let target = a.target;
    let body: BodyInit | null = req.body;
    if (a.vertex) {
      // The whole body is needed to translate it; a bounded read, counted as sent.
      const text = await boundedText(req, MAX_TRANSLATED_BODY);
      if (text !== undefined) a.traffic.sent(new TextEncoder().encode(text).length);
      const t = text === undefined
        ? { error: `the request body is over ${MAX_TRANSLATED_BODY} bytes` }
        : translateMessages(text, a.vertex.config);
      if ("error" in t) {
        a.model?.end({ responded: false });
        a.traffic.end();
        return proxyText(400, `cannot send this call to Vertex AI: ${t.error}`);
      }
      if (t.dropped.length) log.debug("proxy: fields not sent to Vertex", { fields: t.dropped });
      target = upstreamUrl({ host: a.vertex.host, pathAndQuery: t.path }, deps.overrides);
      for (const h of NOT_FOR_VERTEX) a.headers.delete(h);
      a.headers.set("content-type", "application/json");
      body = t.body;
    }
    return await relay(req, info, {
      target,
      body,
      counted: a.vertex !== undefined,
      ...(a.refresh ? { refresh: vertexShaped(a.refresh, a.vertex !== undefined) } : {}),
      headers: a.headers,
      traffic: a.traffic,
      model: a.model,
      secrets: a.secrets,
      client,
      deps,
      provider: a.provider,
    });
  };
}

/** The refreshed head of a translated call loses Anthropic's headers as the first one did. */
function vertexShaped(
  refresh: () => Promise<Headers | undefined>,
  translated: boolean,
): () => Promise<Headers | undefined> {
  if (!translated) return refresh;
  return async () => {
    const h = await refresh();
    if (!h) return h;
    for (const name of NOT_FOR_VERTEX) h.delete(name);
    h.set("content-type", "application/json");
    return h;
  };
}

/** The request body as text, or undefined when it is over `max` bytes. */
async function boundedText(req: Request, max: number): Promise<string | undefined> {
  if (!req.body) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const c of req.body) {
    size += c.length;
    if (size > max) return undefined;
    chunks.push(c);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(all);
}

async function relay(
  req: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  o: {
    target: string;
    /** The body to send (the guest's, or a translation already counted as sent). */
    body: BodyInit | null;
    /** True when the body's bytes were counted already. */
    counted: boolean;
    /** After a 401: a head with a refreshed command-sourced credential, if there is one. */
    refresh?: () => Promise<Headers | undefined>;
    headers: Headers;
    traffic: TrafficCall;
    model: ModelCall | undefined;
    secrets: Secret[];
    client: Deno.HttpClient | undefined;
    deps: InterceptDeps;
    provider: "anthropic" | "openai" | undefined;
  },
): Promise<Response> {
  const { traffic, model } = o;
  // Aborts the upstream exchange when the guest goes away before the response is delivered.
  const gone = new AbortController();
  info.completed.catch(() => gone.abort());
  let upstream: Response;
  const send = (headers: Headers) => {
    const body = o.counted || !(o.body instanceof ReadableStream)
      ? o.body
      : o.body.pipeThrough(counting((n) => traffic.sent(n)));
    return fetch(o.target, {
      method: req.method,
      headers,
      body,
      redirect: "manual",
      signal: gone.signal,
      ...(o.client ? { client: o.client } : {}),
    });
  };
  try {
    upstream = await send(o.headers);
    // A command-sourced credential was refused: refreshed (at most once per ttl), and sent
    // once more with it when the body is at hand again (none, or a translated text).
    if (upstream.status === 401 && o.refresh) {
      const refreshed = o.refresh();
      if (o.body instanceof ReadableStream) void refreshed.catch(() => {});
      else {
        const headers = await refreshed.catch(() => undefined);
        if (headers) {
          await upstream.body?.cancel();
          upstream = await send(headers);
        }
      }
    }
  } catch (e) {
    model?.end({ responded: false });
    traffic.end();
    const why = scrubText(String((e as Error)?.message ?? e), o.secrets);
    const host = new URL(o.target).host;
    log.warn("proxy: upstream unreachable", { host, error: why });
    return proxyText(502, `upstream ${host} unreachable: ${why}`);
  }
  traffic.responded();
  const plan = bodyPlan(upstream.headers.get("content-encoding"), {
    body: upstream.body !== null && req.method !== "HEAD",
    scrubbing: !Scrubber.of(o.secrets).empty,
  });
  if (plan.kind === "refuse") {
    await upstream.body?.cancel();
    model?.end({ responded: false });
    traffic.end();
    const host = new URL(o.target).host;
    log.warn("proxy: upstream failed", { host, error: plan.reason });
    return proxyText(502, `upstream ${host} failed: ${plan.reason}`);
  }
  const headers = responseHeaders(upstream.headers, o.secrets);
  if (plan.kind === "decode") {
    headers.delete("content-encoding");
    headers.delete("content-length");
  }
  traffic.received(headBytes("HTTP/1.1", String(upstream.status), headers));
  const readable = upstream.status >= 200 && upstream.status < 300 && o.provider !== undefined &&
    plan.kind !== "opaque";
  const kind = readable ? bodyKind(upstream.headers.get("content-type")) : undefined;
  const usage = model && o.provider && kind ? new UsageReader(o.provider, kind) : undefined;
  const reader = usage && plan.kind === "copy"
    ? new DecodingUsageReader(usage, plan.codings)
    : usage;
  const finish = () => {
    const u = reader?.finish();
    traffic.end();
    if (u instanceof Promise) void u.then((got) => model?.end({ responded: true, usage: got }));
    else model?.end({ responded: true, ...(u ? { usage: u } : {}) });
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
  const raw = plan.kind === "decode" ? decodeStream(upstream.body, plan.codings) : upstream.body;
  const body = relayBody(raw, { traffic, reader, secrets: o.secrets });
  return new Response(body, { status: upstream.status, statusText: upstream.statusText, headers });
}
