/**
 * {@link startProxy}: binds the intercepting TLS server (plus its loopback twin for
 * CONNECT hand-over), the forward proxy and the ops port(s) around one counter, and tears
 * them all down again. Everything it serves comes in as arguments: policy, CA, caller
 * lookup, egress secrets, clock.
 *
 * @module
 */

import { IsbError, log, VERSION } from "../rpc/mod.ts";
import type { CaSigner } from "./ca.ts";
import type { Caller, CallerLookup } from "./clients.ts";
import { ActivityCounter } from "./counter.ts";
import { serveForward } from "./forward.ts";
import { healthHandler, type HealthInfo } from "./health.ts";
import type { Policy } from "./policy.ts";
import { type EgressLookup, interceptHandler } from "./server.ts";
import { type RelayDeps, type RelayServer, serveRelay } from "./relay.ts";
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
  /** The CA that signs the leaf. */
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
  const leaf = await opts.ca.issueLeaf(opts.policy.certNames());
  const handler = interceptHandler({
    policy: opts.policy,
    clients: opts.clients,
    counter,
    overrides,
    handoff,
    ...(opts.egress ? { egress: opts.egress } : {}),
    ...(opts.httpClient ? { httpClient: opts.httpClient } : {}),
  });
  const abort = new AbortController();
  const servers: Deno.HttpServer<Deno.NetAddr>[] = [];
  const relays: RelayServer[] = [];
  const forwardListener = listenOrThrow(opts.listen.forward);
  let forward: ReturnType<typeof serveForward> | undefined;
  try {
    // What the relay does not speak itself (upgrades, HTTP/1.0) goes to this handler.
    const slow = Deno.serve({
      hostname: "127.0.0.1",
      port: 0,
      signal: abort.signal,
      onListen() {},
      onError: (e) => {
        log.warn("proxy: request failed", { error: String((e as Error)?.message ?? e) });
        return new Response("isx-proxy: internal error\n", { status: 500 });
      },
    }, handler);
    servers.push(slow);
    const relayDeps: RelayDeps = {
      policy: opts.policy,
      clients: opts.clients,
      counter,
      overrides,
      handoff,
      slowPort: slow.addr.port,
      ...(opts.egress ? { egress: opts.egress } : {}),
      ...(opts.upstreamCaCerts ? { upstreamCaCerts: opts.upstreamCaCerts } : {}),
    };
    const serveTls = (hostname: string, port: number) =>
      serveRelay(
        listenTlsOrThrow({ hostname, port }, leaf),
        relayDeps,
      );
    relays.push(serveTls(opts.listen.tls.hostname, opts.listen.tls.port));
    const mitm = serveTls("127.0.0.1", 0);
    relays.push(mitm);
    const hostAddresses = new Set(
      [opts.listen.tls, opts.listen.forward, ...opts.listen.health].map((l) =>
        normalizeAddress(l.hostname)
      )
        .filter((a) => a !== "0.0.0.0" && a !== "::"),
    );
    const startedAt = now();
    const listen = {
      tls: `${opts.listen.tls.hostname}:${relays[0]!.addr.port}`,
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
      mitmPort: mitm.addr.port,
      handoff,
      hostAddresses,
      ...(opts.egress ? { egress: opts.egress } : {}),
      ...(opts.allowLoopbackTargets ? { allowLoopbackTargets: true } : {}),
    });
    const fwd = forward;
    let closed: Promise<void> | undefined;
    return {
      addrs: {
        tls: relays[0]!.addr,
        forward: forwardListener.addr as Deno.NetAddr,
        mitm: mitm.addr,
        health: healthServers.map((s) => s.addr),
      },
      counter,
      caFingerprint: opts.ca.fingerprint,
      health,
      close() {
        closed ??= (async () => {
          abort.abort();
          await fwd.shutdown();
          await Promise.all(relays.map((r) => r.shutdown()));
          await Promise.all(servers.map((s) => s.finished));
        })();
        return closed;
      },
    };
  } catch (e) {
    abort.abort();
    if (forward) await forward.shutdown();
    else forwardListener.close();
    await Promise.all(relays.map((r) => r.shutdown()));
    await Promise.all(servers.map((s) => s.finished));
    if (e instanceof IsbError) throw e;
    throw new IsbError("io", `start proxy: ${(e as Error)?.message ?? e}`, { cause: e });
  }
}

function listenTlsOrThrow(
  at: { hostname: string; port: number },
  leaf: { certPem: string; keyPem: string },
): Deno.TlsListener {
  try {
    return Deno.listenTls({
      hostname: at.hostname,
      port: at.port,
      cert: leaf.certPem,
      key: leaf.keyPem,
      alpnProtocols: ["http/1.1"],
    });
  } catch (e) {
    throw new IsbError(
      "io",
      `start proxy: listen on ${at.hostname}:${at.port}: ${(e as Error).message}`,
      { cause: e },
    );
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
