/**
 * An intercepting TLS server for one CA and one set of names: the relay (proxy/relay/relay.ts) on
 * each listen address, and behind them, on a loopback port, the `Deno.serve` handler the
 * relay hands what it does not speak itself (upgrades, HTTP/1.0). The proxy runs one for the
 * intercepted domains (on the bridge gateway, plus the loopback twin CONNECT tunnels are
 * handed to); each isb egress bridge gets its own with that bridge's CA. Each handshake gets
 * the leaf for the name the client sent, from a {@link LeafCache} shared by the listeners
 * (proxy/tls/sni.ts); a name not intercepted, or none, fails the handshake. Where the runtime has
 * no SNI hook, every listener presents the cache's single all-names leaf instead.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import type { InterceptDeps } from "../callers/admit.ts";
import type { Handoff } from "../callers/handoff.ts";
import { relayConnection, type RelayDeps } from "../relay/relay.ts";
import { interceptHandler } from "../relay/server.ts";
import type { Leaf, LeafCache } from "./leaf_cache.ts";
import { listenTlsSni, resolverOf, sniSupported } from "./sni.ts";
import type { Guard } from "../egress/guard.ts";
import { serveGuardedConnector } from "../egress/connect.ts";
import { UpstreamPool } from "../relay/upstream_pool.ts";
import { type Gate, serveConns, type Served } from "../host/accept.ts";

/** A running intercepting server. */
export interface InterceptServer {
  /** The bound TLS addresses, in the order asked. */
  readonly addrs: Deno.NetAddr[];
  /** Stops every listener and connection. */
  close(): Promise<void>;
}

function serveRelay(
  listener: Deno.Listener,
  deps: RelayDeps,
  pool: UpstreamPool,
  gate: Gate | undefined,
): Served {
  // A refused guest is closed at once (Deno may already be doing its handshake).
  return serveConns(
    listener,
    (conn, stop) => relayConnection(conn, deps, pool, stop),
    "TLS listener",
    {
      gate,
    },
  );
}

function listenTls(
  at: { hostname: string; port: number },
  certs: LeafCache | Leaf,
): Deno.TlsListener {
  try {
    if ("certPem" in certs) {
      return Deno.listenTls({
        hostname: at.hostname,
        port: at.port,
        cert: certs.certPem,
        key: certs.keyPem,
        alpnProtocols: ["http/1.1"],
      });
    }
    return listenTlsSni(at, {
      resolve: resolverOf((name) => certs.forName(name)),
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

/**
 * Starts the relay on every address in `listen` with `leaves`, and its loopback handler.
 * Connections on each listener not marked `internal` pass `gate` first (the per-instance cap).
 */
export async function serveIntercept(
  listen: readonly { hostname: string; port: number; internal?: boolean }[],
  o: {
    /** Per-name leaves (and the all-names fallback). */
    leaves: LeafCache;
    /** The CA behind `leaves` (for the one-time SNI probe). */
    ca: { certPem: string; issueLeaf(names: readonly string[]): Promise<Leaf> };
    deps: InterceptDeps & { handoff: Handoff };
    upstreamCaCerts?: string[] | undefined;
    /** Connect to upstream host names only at public addresses this resolver gives (egress). */
    guard?: Guard;
    /** Admits guest connections (the per-instance cap). */
    gate?: Gate;
  },
): Promise<InterceptServer> {
  // Per-name leaves when the runtime's SNI hook works, else one leaf for all names.
  const certs = (await sniSupported(o.ca)) ? o.leaves : await o.leaves.all();
  const abort = new AbortController();
  // Egress: the Deno.serve path's fetch and WebSocket connect only where the guard allows.
  const connector = o.guard
    ? serveGuardedConnector(o.guard, {
      ...(o.deps.limits ? { limits: o.deps.limits } : {}),
      ...(o.upstreamCaCerts ? { caCerts: o.upstreamCaCerts } : {}),
    })
    : undefined;
  const handlerDeps = connector ? { ...o.deps, guardedClient: connector.client } : o.deps;
  const slow: Deno.HttpServer<Deno.NetAddr> = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: abort.signal,
    onListen() {},
    onError: (e) => {
      log.warn("proxy: request failed", { error: String((e as Error)?.message ?? e) });
      return new Response("isx-proxy: internal error\n", { status: 500 });
    },
  }, interceptHandler(handlerDeps, (): number => slow.addr.port));
  const pool = new UpstreamPool({
    ...(o.upstreamCaCerts ? { caCerts: o.upstreamCaCerts } : {}),
    ...(o.guard ? { guard: o.guard } : {}),
  });
  const deps: RelayDeps = {
    ...o.deps,
    slowPort: slow.addr.port,
    ...(o.upstreamCaCerts ? { upstreamCaCerts: o.upstreamCaCerts } : {}),
  };
  const relays: Served[] = [];
  const close = async () => {
    await Promise.all(relays.map((r) => r.shutdown()));
    pool.close();
    abort.abort();
    await slow.finished;
    await connector?.close();
  };
  try {
    for (const at of listen) {
      relays.push(serveRelay(listenTls(at, certs), deps, pool, at.internal ? undefined : o.gate));
    }
  } catch (e) {
    await close();
    throw e;
  }
  let closed: Promise<void> | undefined;
  return {
    addrs: relays.map((r) => r.addr),
    close: () => (closed ??= close()),
  };
}
