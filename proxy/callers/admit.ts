/**
 * The decision on one intercepted request, shared by the relay (proxy/relay/relay.ts) and the
 * `Deno.serve` handler (proxy/relay/server.ts), so both apply the same rules in the same order
 * (shared/spec/isx-mcp.md §7).
 *
 * Order: the calling instance (source address, or the handed-over connection's; unknown or
 * an unclaimed warm-pool member → 403, counted nowhere), the Host is one DNS sends here (else 421), an
 * `X-Isx-Instance-Secret`, if presented, belongs to that same instance (else 403), the
 * policy's route (a pin or template account naming a missing account, or a pin of another
 * Claude auth mode → 502, fail closed), a Vertex token when the route needs one (none → 502,
 * fail closed). Then the counters start
 * and the upstream head is built: hop-by-hop and isx headers dropped, credentials
 * injected, `Accept-Encoding: identity` (so bodies can be read and scrubbed).
 *
 * @module
 */

import { log, sha256Hex } from "../../rpc/base.ts";
import type { ModelProvider } from "../activity/activity.ts";
import { type Caller, type CallerLookup, normalizeAddress } from "./clients.ts";
import type { ActivityCounter, ModelCall, TrafficCall } from "../activity/counter.ts";
import { hostOnly, type Policy } from "../config/policy.ts";
import {
  applyHeaderOps,
  forwardableHeaders,
  type HeaderOp,
  INSTANCE_SECRET_HEADER,
} from "../relay/rewrite.ts";
import type { Handoff } from "./handoff.ts";
import { constantTimeEqual, type Secret } from "../config/secret.ts";
import { type UpstreamOrigin, upstreamOrigin, upstreamUrl } from "../relay/upstream.ts";
import type { VertexConfig } from "../config/credentials.ts";
import { vertexHost } from "../config/vertex.ts";
import type { VertexTokens } from "../config/vertex_token.ts";
import type { ProxyLimits } from "./limits.ts";

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
  /** Interception and injection decisions. */
  policy: Policy;
  /** Source address to instance. */
  clients: CallerLookup;
  /** The counters every request is counted in. */
  counter: ActivityCounter;
  /** Test-only loopback origins per host (validated by `checkOverrides`). */
  overrides: ReadonlyMap<string, string>;
  /** isb egress secrets, when this server serves egress bridges or isx callers with them. */
  egress?: EgressLookup;
  /** Callers of connections handed over on loopback, by listener and source port. */
  handoff?: Pick<Handoff, "get">;
  /** The HTTP client for upstream requests (default: Deno's). */
  httpClient?: Deno.HttpClient;
  /** The client for real upstreams on egress bridges: its connections are guarded tunnels. */
  guardedClient?: Deno.HttpClient;
  /** Vertex access tokens (needed once an account of kind `vertex` exists). */
  vertexTokens?: VertexTokens;
  /** Timeouts of guest connections and upstream streams (default `DEFAULT_LIMITS`). */
  limits?: ProxyLimits;
}

/**
 * True when a presented instance secret belongs to this caller (constant-time compare of the
 * same digest `mcp/instances/secret.ts` stamps).
 */
export function secretMatches(caller: Caller, presented: string): boolean {
  if (!caller.secretSha256) return false;
  return constantTimeEqual(sha256Hex(presented.trim()), caller.secretSha256);
}

/**
 * Resolves the caller of a connection accepted on `localPort`, including handed-over
 * connections (CONNECT tunnels, upgrades).
 */
export async function callerOf(
  deps: Pick<InterceptDeps, "clients" | "handoff">,
  remote: Deno.NetAddr,
  localPort?: number,
): Promise<Caller | undefined> {
  // Hand-overs come from this process's own sockets, always bound to 127.0.0.1.
  if (
    deps.handoff && localPort !== undefined && normalizeAddress(remote.hostname) === "127.0.0.1"
  ) {
    const handed = deps.handoff.get(localPort, remote.port);
    if (handed) return handed;
  }
  return await deps.clients.identify(remote);
}

/** One intercepted request as the servers see it, before any decision. */
export interface RequestFacts {
  /** The method, as sent. */
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
    /** Set when the body must be translated for Vertex (`/v1/messages` → `:rawPredict`). */
    vertex?: { config: VertexConfig; host: string };
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
  // a warm-pool member before its claim (mcp/pool/): nobody's, so nothing is counted for it
  if (caller.pooled) return answer(403, "this instance is a warm-pool member, not claimed yet");
  const m = /^(?:\[[0-9a-fA-F:.]+\]|[^\s/?#@:[\]]+)(?::(\d{1,5}))?$/.exec(req.authority);
  if (!m) return answer(400, "malformed Host header");
  const host = hostOnly(req.authority);
  const egressHost = deps.egress?.covers(caller, host) ?? false;
  if (!deps.policy.covers(host) && !egressHost) {
    return answer(421, `"${host}" is not intercepted here`);
  }
  const presented = req.headers.get(INSTANCE_SECRET_HEADER);
  if (presented !== null && !secretMatches(caller, presented)) {
    return answer(403, "the instance secret does not belong to the calling instance");
  }
  const path = req.pathAndQuery.split("?")[0]!;
  const route = deps.policy.route({ host, path }, caller);
  const websocket = req.headers.get("upgrade")?.toLowerCase() === "websocket";
  const traffic = deps.counter.traffic(caller, { websocket });
  traffic.sent(req.headBytes);
  if (route.kind === "fail") {
    traffic.end();
    log.warn("proxy: failing closed", { instance: caller.name, host, reason: route.message });
    return answer(route.status, route.message);
  }
  const ops = [...route.ops];
  if (route.vertex) {
    // Fail closed: without a token the call would reach Vertex unauthenticated.
    if (!deps.vertexTokens) {
      traffic.end();
      return answer(502, "a Vertex account is configured but this proxy cannot get tokens");
    }
    try {
      const token = await deps.vertexTokens.get(route.vertex.config);
      ops.push({ op: "set", name: "authorization", value: token, prefix: "Bearer " });
    } catch (e) {
      traffic.end();
      log.warn("proxy: no Vertex token", { instance: caller.name, error: (e as Error).message });
      return answer(502, (e as Error).message);
    }
  }
  const secrets = [
    ...deps.policy.secrets(),
    ...(deps.egress?.secrets() ?? []),
    ...(deps.vertexTokens?.secrets() ?? []),
  ];
  const headers = forwardableHeaders(req.headers);
  applyHeaderOps(headers, [...ops, ...(deps.egress?.ops(caller, host) ?? [])]);
  const port = m[1] ? Number(m[1]) : undefined;
  const translate = route.vertex?.mode === "translate"
    ? { config: route.vertex.config, host: vertexHost(route.vertex.config.region) }
    : undefined;
  const where = translate ? { host: translate.host } : { host, ...(port ? { port } : {}) };
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
    ...(translate ? { vertex: translate } : {}),
  };
}
