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
 * fail closed), the values of command-sourced credentials (proxy/config/command_source.ts:
 * cached, single flight; none → 502, fail closed). Then the counters start
 * and the upstream head is built: hop-by-hop and isx headers dropped, credentials
 * injected, `Accept-Encoding: identity` (so bodies can be read and scrubbed). A relay that
 * gets a 401 for such a request asks {@link Admission}'s `refresh` for a head with a newer
 * value (the command runs at most once more per ttl) and may send the request once more.
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
  utf8Base64,
} from "../relay/rewrite.ts";
import type { Handoff } from "./handoff.ts";
import { constantTimeEqual, Secret } from "../config/secret.ts";
import { type UpstreamOrigin, upstreamOrigin, upstreamUrl } from "../relay/upstream.ts";
import type { Value, VertexConfig } from "../config/credentials.ts";
import { vertexHost } from "../config/vertex.ts";
import { vertexRef } from "../config/vertex_token.ts";
import { type CommandRef, type CommandSources, isCommand } from "../config/command_source.ts";
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
  /** Command-sourced values and Vertex tokens (needed once the file names a command). */
  sources?: CommandSources;
  /** Timeouts of guest connections and upstream streams (default `DEFAULT_LIMITS`). */
  limits?: ProxyLimits;
  /** isx mcp for coordinators at `mcp.isx.internal` (proxy/mcp_endpoint/), when served. */
  mcp?: { handle(req: Request, caller: Caller | undefined): Promise<Response> };
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
    /**
     * Set when a command-sourced value went into the head: after an upstream 401, the head
     * with a newer value (its value added to `secrets`), or undefined when there is none.
     */
    refresh?: () => Promise<Headers | undefined>;
  };

/** A command-sourced value that went into a head. */
interface Used {
  ref: CommandRef;
  value: Secret;
}

/** The ops with every command value replaced by its current value (`fresh` ones first). */
async function resolveOps(
  ops: readonly HeaderOp<Value>[],
  sources: CommandSources,
  fresh: ReadonlyMap<CommandRef, Secret> = new Map(),
): Promise<{ ops: HeaderOp[]; used: Used[]; secrets: Secret[] }> {
  const used: Used[] = [];
  const secrets: Secret[] = [];
  const out: HeaderOp[] = [];
  for (const op of ops) {
    if (op.op === "delete" || !isCommand(op.value)) {
      out.push(op as HeaderOp);
      continue;
    }
    const ref = op.value;
    const value = fresh.get(ref) ?? await sources.value(ref);
    used.push({ ref, value });
    if (op.op === "basic" && !op.keepGuestUser) {
      secrets.push(new Secret(utf8Base64(`${op.user}:${value.reveal()}`)));
    }
    out.push({ ...op, value });
  }
  return { ops: out, used, secrets };
}

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
  if (!caller) {
    deps.counter.refusal({
      kind: "unknown_caller",
      instance: null,
      target: req.authority,
      reason: "a request to an intercepted host from an address that belongs to no instance",
    });
    return answer(403, "this address belongs to no instance");
  }
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
    deps.counter.refusal({
      kind: "policy",
      instance: caller.name,
      target: host,
      reason: route.message,
    });
    return answer(route.status, route.message);
  }
  const wanted: HeaderOp<Value>[] = [...route.ops];
  if (route.vertex) {
    wanted.push({
      op: "set",
      name: "authorization",
      value: vertexRef(route.vertex.config),
      prefix: "Bearer ",
    });
  }
  const needsSources = wanted.some((o) => o.op !== "delete" && isCommand(o.value));
  // Fail closed: without its value the call would go upstream unauthenticated.
  if (needsSources && !deps.sources) {
    traffic.end();
    return answer(502, "a credential comes from a command but this proxy cannot run it");
  }
  let resolved: Awaited<ReturnType<typeof resolveOps>>;
  try {
    resolved = deps.sources
      ? await resolveOps(wanted, deps.sources)
      : { ops: wanted as HeaderOp[], used: [], secrets: [] };
  } catch (e) {
    traffic.end();
    log.warn("proxy: no credential value", { instance: caller.name, error: (e as Error).message });
    return answer(502, (e as Error).message);
  }
  const secrets = [
    ...deps.policy.secrets(),
    ...(deps.egress?.secrets() ?? []),
    ...(deps.sources?.secrets() ?? []),
    ...resolved.secrets,
  ];
  const egressOps = deps.egress?.ops(caller, host) ?? [];
  const build = (ops: HeaderOp[]) => {
    const headers = forwardableHeaders(req.headers);
    applyHeaderOps(headers, [...ops, ...egressOps]);
    if (!websocket) headers.set("accept-encoding", "identity");
    return headers;
  };
  const headers = build(resolved.ops);
  let refresh: (() => Promise<Headers | undefined>) | undefined;
  if (resolved.used.length && deps.sources) {
    const sources = deps.sources;
    const used = resolved.used;
    refresh = async () => {
      const fresh = new Map<CommandRef, Secret>();
      for (const u of used) {
        const next = await sources.refresh(u.ref, u.value);
        if (next) fresh.set(u.ref, next);
      }
      if (!fresh.size) return undefined;
      const again = await resolveOps(wanted, sources, fresh).catch(() => undefined);
      if (!again) return undefined;
      secrets.push(...sources.secrets(), ...again.secrets);
      return build(again.ops);
    };
  }
  const port = m[1] ? Number(m[1]) : undefined;
  const translate = route.vertex?.mode === "translate"
    ? { config: route.vertex.config, host: vertexHost(route.vertex.config.region) }
    : undefined;
  const where = translate ? { host: translate.host } : { host, ...(port ? { port } : {}) };
  const origin = upstreamOrigin(where, deps.overrides);
  const target = upstreamUrl({ ...where, pathAndQuery: req.pathAndQuery }, deps.overrides);
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
    ...(refresh ? { refresh } : {}),
  };
}
