/**
 * {@link startProxy}: binds the intercepting TLS server (the relay, plus its loopback twin
 * for CONNECT hand-over; proxy/intercept.ts), the forward proxy and the ops port(s) around
 * one counter, and tears them all down again. Everything it serves comes in as arguments: policy, CA, caller
 * lookup, egress secrets, clock.
 *
 * @module
 */

import { IsbError, VERSION } from "../rpc/mod.ts";
import type { CaSigner } from "./ca.ts";
import type { Caller, CallerLookup } from "./clients.ts";
import { ActivityCounter } from "./counter.ts";
import { serveForward } from "./forward.ts";
import { healthHandler, type HealthInfo } from "./health.ts";
import type { Policy } from "./policy.ts";
import type { EgressLookup } from "./admit.ts";
import { type InterceptServer, serveIntercept } from "./intercept.ts";
import { LeafCache } from "./leaf_cache.ts";
import { checkOverrides } from "./upstream.ts";
import { normalizeAddress } from "./clients.ts";

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
  /** Whether the bridge DNS points at the proxy (reported by `/health`). */
  dnsConfigured?: boolean;
  /** Enables `POST /shutdown` on the ops port for callers presenting this token. */
  shutdown?: { token: string; onShutdown: () => void };
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
  /** Fingerprint of the CA guests must trust. */
  readonly caFingerprint: string;
  /** The `/health` body. */
  health(): HealthInfo;
  /** Stops every listener and connection. */
  close(): Promise<void>;
}

/** Starts the listeners; resolves once all are bound. */
export async function startProxy(opts: StartProxyOptions): Promise<ProxyHandle> {
  const now = opts.now ?? Date.now;
  const overrides = checkOverrides(opts.upstreamOverrides);
  const counter = new ActivityCounter({ now, providers: opts.policy.providers() });
  const handoff = new Map<number, Caller>();
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
  try {
    // The gateway address, and the loopback twin that CONNECTs to intercepted hosts reach.
    intercept = await serveIntercept([opts.listen.tls, { hostname: "127.0.0.1", port: 0 }], {
      leaves,
      ca: opts.ca,
      deps: {
        policy: opts.policy,
        clients: opts.clients,
        counter,
        overrides,
        handoff,
        ...(opts.egress ? { egress: opts.egress } : {}),
        ...(opts.httpClient ? { httpClient: opts.httpClient } : {}),
      },
      upstreamCaCerts: opts.upstreamCaCerts,
    });
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
    const health = (): HealthInfo => ({
      version: VERSION,
      gitSha: null,
      runtime: `deno ${Deno.version.deno}`,
      pid: Deno.pid,
      caFingerprint: opts.ca.fingerprint,
      dnsConfigured: opts.dnsConfigured ?? false,
      configDrifted: false,
      authError: null,
      startedAt,
      listen,
    });
    const ops = healthHandler({
      clients: opts.clients,
      counter,
      health,
      hostAddresses,
      ...(opts.shutdown ? { shutdown: opts.shutdown } : {}),
    });
    const healthServers = opts.listen.health.map((h) =>
      Deno.serve({ hostname: h.hostname, port: h.port, signal: abort.signal, onListen() {} }, ops)
    );
    servers.push(...healthServers);
    forward = serveForward(forwardListener, {
      clients: opts.clients,
      counter,
      policy: opts.policy,
      mitmPort: mitmAddr.port,
      handoff,
      hostAddresses,
      ...(opts.egress ? { egress: opts.egress } : {}),
      ...(opts.allowLoopbackTargets ? { allowLoopbackTargets: true } : {}),
    });
    const fwd = forward;
    const icp = intercept;
    let closed: Promise<void> | undefined;
    return {
      addrs: {
        tls: tlsAddr,
        forward: forwardListener.addr as Deno.NetAddr,
        mitm: mitmAddr,
        health: healthServers.map((s) => s.addr),
      },
      counter,
      caFingerprint: opts.ca.fingerprint,
      health,
      close() {
        closed ??= (async () => {
          abort.abort();
          await fwd.shutdown();
          await icp.close();
          await Promise.all(servers.map((s) => s.finished));
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
    if (e instanceof IsbError) throw e;
    throw new IsbError("io", `start proxy: ${(e as Error)?.message ?? e}`, { cause: e });
  }
}

function listenOrThrow(at: { hostname: string; port: number }): Deno.Listener {
  try {
    return Deno.listen({ hostname: at.hostname, port: at.port });
  } catch (e) {
    throw new IsbError(
      "io",
      `start proxy: listen on ${at.hostname}:${at.port}: ${(e as Error).message}`,
      { cause: e },
    );
  }
}
