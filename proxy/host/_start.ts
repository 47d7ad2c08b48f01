/**
 * {@link startProxy}: binds the intercepting TLS server (the relay, plus its loopback twin
 * for CONNECT hand-over; proxy/tls/intercept.ts), the forward proxy and the ops port(s) around
 * one counter, and tears them all down again. Everything it serves comes in as arguments: policy, CA, caller
 * lookup, egress secrets, clock. More bridges (isx's proxy-only bridge) are served on demand
 * by {@link ProxyHandle.addListen}: the same TLS interception and forward proxy, on that
 * bridge's gateway, sharing everything else.
 *
 * @module
 */

import { IsbError, VERSION } from "../../rpc/base.ts";
import type { CaSigner } from "../tls/ca.ts";
import type { CallerLookup } from "../callers/clients.ts";
import { ActivityCounter } from "../activity/counter.ts";
import { serveForward } from "../relay/forward.ts";
import { healthHandler, type HealthInfo, type HealthStatus } from "./_health.ts";
import type { Policy } from "../config/policy.ts";
import type { EgressLookup } from "../callers/admit.ts";
import { type InterceptServer, serveIntercept } from "../tls/intercept.ts";
import { LeafCache } from "../tls/leaf_cache.ts";
import { checkOverrides } from "../relay/upstream.ts";
import { normalizeAddress } from "../callers/clients.ts";
import { CommandSources } from "../config/command_source.ts";
import type { ReloadState } from "../config/reload.ts";
import {
  ConnectionCap,
  connectionGate,
  DEFAULT_LIMITS,
  type ProxyLimits,
} from "../callers/limits.ts";
import type { Resolver } from "../egress/guard.ts";
import type { HostNets } from "../egress/dial.ts";
import { Handoff } from "../callers/handoff.ts";
import { type ExtraListen, ExtraListens, listenOrThrow } from "./_extra_listens.ts";
import { dashboardHandler } from "../dashboard/server.ts";
import { TaskBoard } from "../dashboard/tasks.ts";
import type { InstanceShelf } from "../dashboard/view.ts";
import { McpEndpoint, type McpEndpointOptions } from "../mcp_endpoint/mod.ts";

export type { ExtraListen } from "./_extra_listens.ts";

/** Where the proxy listens. */
export interface ProxyListen {
  /** The intercepting TLS server (gateway:443). */
  tls: { hostname: string; port: number };
  /** The explicit forward proxy (gateway:3128). */
  forward: { hostname: string; port: number };
  /** The ops port(s) (gateway:18080 and 127.0.0.1:18080). */
  health: { hostname: string; port: number }[];
}

/** Options of {@link startProxy}. */
export interface StartProxyOptions {
  /** Where to listen. */
  listen: ProxyListen;
  /** Injection and interception decisions. */
  policy: Policy;
  /** The CA that signs the leaves (one per intercepted server name, on first use). */
  ca: CaSigner;
  /** Source address to instance. */
  clients: CallerLookup;
  /** isb egress secrets per caller. */
  egress?: EgressLookup;
  /** The clock (epoch ms). */
  now?: () => number;
  /** Test only: loopback origins standing in for upstream hosts. */
  upstreamOverrides?: Record<string, string>;
  /** Test only: let the forward proxy reach loopback targets. */
  allowLoopbackTargets?: boolean;
  /** HTTP client for upstream requests of the `Deno.serve` path (WebSockets and the like). */
  httpClient?: Deno.HttpClient;
  /** Test and benchmark only: CA certificates the relay trusts for upstream TLS. */
  upstreamCaCerts?: string[];
  /** Command-sourced values and Vertex tokens (default: each command run for real, cached). */
  sources?: CommandSources;
  /** The same, under its former name (a `VertexTokens` is a {@link CommandSources}). */
  vertexTokens?: CommandSources;
  /** Whether the bridge DNS points at the proxy (reported by `/health` without `status`). */
  dnsConfigured?: boolean;
  /** The `/health` fields computed on each read (`isx proxy` computes them from its files). */
  status?: () => Promise<HealthStatus>;
  /** The live reload's state, when the credentials are reloaded (proxy/config/reload.ts). */
  reload?: () => ReloadState;
  /** Enables `POST /shutdown` on the ops port for callers presenting this token. */
  shutdown?: { token: string; onShutdown: () => void };
  /** `GET /dump` (with the shutdown token): the effective config, secrets as lengths. */
  dump?: () => unknown;
  /** Per-instance connection cap and timeouts (default {@link DEFAULT_LIMITS}). */
  limits?: Partial<ProxyLimits>;
  /** Test only: looks up forward-proxy target names (default: the system's DNS). */
  resolve?: Resolver;
  /** Test only: the host's addresses and subnets (default: its interfaces). */
  hostNets?: () => HostNets;
  /**
   * Serves the dashboard on the ops port(s) with this page token, and `POST /tasks` with
   * this report token; `shelf` holds the registry's last listing (proxy/dashboard).
   */
  dashboard?: { token: string; reportToken: string; shelf: InstanceShelf };
  /**
   * Serve isx mcp to coordinators at `mcp.isx.internal` (the policy must intercept that
   * name): how to start each one's `isx mcp --caller-instance` (proxy/mcp_endpoint/).
   */
  mcp?: Omit<McpEndpointOptions, "clients">;
}

/** A running proxy. */
export interface ProxyHandle {
  /** The bound addresses (ports resolved when 0 was asked). */
  readonly addrs: {
    tls: Deno.NetAddr;
    forward: Deno.NetAddr;
    mitm: Deno.NetAddr;
    health: Deno.NetAddr[];
  };
  /** The counters behind `/activity`. */
  readonly counter: ActivityCounter;
  /** The tasks `isx mcp` reported (the dashboard shows them). */
  readonly tasks: TaskBoard;
  /** Also serves TLS interception and the forward proxy on `at.hostname` (another gateway). */
  addListen(at: ExtraListen): Promise<{ tls: Deno.NetAddr; forward: Deno.NetAddr }>;
  /** Stops serving an address added by {@link ProxyHandle.addListen} (no-op if unknown). */
  removeListen(hostname: string): Promise<void>;
  /** The addresses added by {@link ProxyHandle.addListen}. */
  extraListens(): string[];
  /** Fingerprint of the CA guests must trust. */
  readonly caFingerprint: string;
  /** The `/health` body. */
  health(): Promise<HealthInfo>;
  /** The coordinators' endpoint, when served. */
  readonly mcp?: McpEndpoint;
  /** Stops every listener and connection. */
  close(): Promise<void>;
}

/** Starts the listeners; resolves once all are bound. */
export async function startProxy(opts: StartProxyOptions): Promise<ProxyHandle> {
  const now = opts.now ?? Date.now;
  const overrides = checkOverrides(opts.upstreamOverrides);
  const counter = new ActivityCounter({ now, providers: opts.policy.providers() });
  const limits: ProxyLimits = { ...DEFAULT_LIMITS, ...opts.limits };
  const gate = connectionGate({
    clients: opts.clients,
    counter,
    cap: new ConnectionCap(limits.connectionsPerInstance),
  });
  const handoff = new Handoff();
  const leaves = new LeafCache(opts.ca, {
    accepts: (name) => opts.policy.covers(name),
    allNames: opts.policy.certNames(),
    now,
  });
  const abort = new AbortController();
  const servers: Deno.HttpServer<Deno.NetAddr>[] = [];
  let intercept: InterceptServer | undefined;
  const forwardListener = listenOrThrow(opts.listen.forward);
  let forward: ReturnType<typeof serveForward> | undefined;
  const mcp = opts.mcp ? new McpEndpoint({ ...opts.mcp, clients: opts.clients }) : undefined;
  const interceptDeps = {
    ...(mcp ? { mcp } : {}),
    limits,
    policy: opts.policy,
    clients: opts.clients,
    counter,
    overrides,
    handoff,
    sources: opts.sources ?? opts.vertexTokens ?? new CommandSources({ now }),
    ...(opts.egress ? { egress: opts.egress } : {}),
    ...(opts.httpClient ? { httpClient: opts.httpClient } : {}),
  };
  try {
    // The gateway address, and the loopback twin that CONNECTs to intercepted hosts reach.
    intercept = await serveIntercept(
      [opts.listen.tls, { hostname: "127.0.0.1", port: 0, internal: true }],
      { leaves, ca: opts.ca, deps: interceptDeps, upstreamCaCerts: opts.upstreamCaCerts, gate },
    );
    const [tlsAddr, mitmAddr] = intercept.addrs as [Deno.NetAddr, Deno.NetAddr];
    const hostAddresses = new Set(
      [opts.listen.tls, opts.listen.forward, ...opts.listen.health].map((l) =>
        normalizeAddress(l.hostname)
      )
        .filter((a) => a !== "0.0.0.0" && a !== "::"),
    );
    const startedAt = now();
    const listen = {
      tls: `${opts.listen.tls.hostname}:${tlsAddr.port}`,
      forward: `${opts.listen.forward.hostname}:${(forwardListener.addr as Deno.NetAddr).port}`,
    };
    const fixed: HealthStatus = {
      gitSha: null,
      dnsConfigured: opts.dnsConfigured ?? false,
      dnsManaged: opts.dnsConfigured ?? false,
      configDrifted: false,
      configDriftedFiles: [],
      authError: null,
      missingCredentials: [],
      programDir: null,
      converging: [],
    };
    const credentials = () => ({
      appliedAt: startedAt,
      reloads: 0,
      error: null,
      errorSince: null,
      ...opts.reload?.(),
      generation: opts.policy.generation,
      sources: interceptDeps.sources.status(),
    });
    const health = async (): Promise<HealthInfo> => ({
      version: VERSION,
      runtime: `deno ${Deno.version.deno}`,
      pid: Deno.pid,
      caFingerprint: opts.ca.fingerprint,
      ...(opts.status ? await opts.status() : fixed),
      credentials: credentials(),
      startedAt,
      listen,
    });
    const tasks = new TaskBoard();
    let healthServers: Deno.HttpServer<Deno.NetAddr>[] = [];
    const dash = opts.dashboard;
    const ops = healthHandler({
      ...(dash
        ? {
          dashboard: dashboardHandler({
            token: dash.token,
            counter,
            clients: opts.clients,
            shelf: dash.shelf,
            tasks,
            health,
            loopbackPorts: () =>
              healthServers.filter((s) => isLoopbackName(s.addr.hostname)).map((s) => s.addr.port),
            signal: abort.signal,
            now,
          }),
          taskReport: { token: dash.reportToken, board: tasks, now },
        }
        : {}),
      clients: opts.clients,
      counter,
      health,
      caPem: opts.ca.certPem,
      hostAddresses,
      accounts: () => opts.policy.accountCatalogue(),
      ...(opts.shutdown ? { shutdown: opts.shutdown } : {}),
      ...(opts.dump ? { dump: opts.dump } : {}),
    });
    healthServers = opts.listen.health.map((h) =>
      Deno.serve({ hostname: h.hostname, port: h.port, signal: abort.signal, onListen() {} }, ops)
    );
    servers.push(...healthServers);
    const forwardDeps = {
      clients: opts.clients,
      counter,
      policy: opts.policy,
      mitmPort: mitmAddr.port,
      handoff,
      hostAddresses,
      ...(opts.egress ? { egress: opts.egress } : {}),
      ...(opts.allowLoopbackTargets ? { allowLoopbackTargets: true } : {}),
      ...(opts.resolve ? { resolve: opts.resolve } : {}),
      ...(opts.hostNets ? { hostNets: opts.hostNets } : {}),
      limits,
      gate,
    };
    forward = serveForward(forwardListener, forwardDeps);
    const fwd = forward;
    const icp = intercept;
    let closed: Promise<void> | undefined;
    const extras = new ExtraListens({
      intercept: {
        leaves,
        ca: opts.ca,
        deps: interceptDeps,
        upstreamCaCerts: opts.upstreamCaCerts,
        gate,
      },
      forward: forwardDeps,
      hostAddresses,
    });
    return {
      addrs: {
        tls: tlsAddr,
        forward: forwardListener.addr as Deno.NetAddr,
        mitm: mitmAddr,
        health: healthServers.map((s) => s.addr),
      },
      counter,
      tasks,
      caFingerprint: opts.ca.fingerprint,
      health,
      ...(mcp ? { mcp } : {}),
      addListen: (at) => extras.add(at),
      removeListen: (hostname) => extras.remove(hostname),
      extraListens: () => extras.names(),
      close() {
        closed ??= (async () => {
          await extras.close();
          abort.abort();
          await fwd.shutdown();
          await icp.close();
          await Promise.all(servers.map((s) => s.finished));
          await mcp?.close();
        })();
        return closed;
      },
    };
  } catch (e) {
    abort.abort();
    if (forward) await forward.shutdown();
    else forwardListener.close();
    await intercept?.close();
    await Promise.all(servers.map((s) => s.finished));
    await mcp?.close();
    if (e instanceof IsbError) throw e;
    throw new IsbError("io", `start proxy: ${(e as Error)?.message ?? e}`, { cause: e });
  }
}

function isLoopbackName(hostname: string): boolean {
  const a = normalizeAddress(hostname);
  return a === "::1" || a.startsWith("127.");
}
