/**
 * An intercepting TLS server for one certificate: the relay (proxy/relay.ts) on each listen
 * address, and behind them, on a loopback port, the `Deno.serve` handler the relay hands
 * what it does not speak itself (upgrades, HTTP/1.0). The proxy runs one for the
 * intercepted domains (on the bridge gateway, plus the loopback twin CONNECT tunnels are
 * handed to); each isb egress bridge gets its own with that bridge's certificate.
 *
 * @module
 */

import { IsbError, log } from "../rpc/mod.ts";
import type { InterceptDeps } from "./admit.ts";
import type { Caller } from "./clients.ts";
import { relayConnection, type RelayDeps } from "./relay.ts";
import { interceptHandler } from "./server.ts";
import { UpstreamPool } from "./upstream_pool.ts";

/** A running intercepting server. */
export interface InterceptServer {
  /** The bound TLS addresses, in the order asked. */
  readonly addrs: Deno.NetAddr[];
  /** Stops every listener and connection. */
  close(): Promise<void>;
}

interface Relay {
  addr: Deno.NetAddr;
  shutdown(): Promise<void>;
}

function serveRelay(listener: Deno.Listener, deps: RelayDeps, pool: UpstreamPool): Relay {
  const conns = new Set<Deno.Conn>();
  const open = new Set<Promise<void>>();
  let closing = false;
  const finished = (async () => {
    while (!closing) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (closing || e instanceof Deno.errors.BadResource) break;
        log.warn("proxy: accept failed", { error: String((e as Error)?.message ?? e) });
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      conns.add(conn);
      const p = relayConnection(conn, deps, pool).finally(() => {
        open.delete(p);
        conns.delete(conn);
      });
      open.add(p);
    }
    await Promise.all(open);
  })();
  return {
    addr: listener.addr as Deno.NetAddr,
    async shutdown() {
      closing = true;
      try {
        listener.close();
      } catch { /* already closed */ }
      for (const c of conns) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      await finished;
    },
  };
}

function listenTls(
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

/** Starts the relay on every address in `listen` with `leaf`, and its loopback handler. */
export async function serveIntercept(
  listen: readonly { hostname: string; port: number }[],
  o: {
    leaf: { certPem: string; keyPem: string };
    deps: InterceptDeps & { handoff: Map<number, Caller> };
    upstreamCaCerts?: string[] | undefined;
  },
): Promise<InterceptServer> {
  const abort = new AbortController();
  const slow = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    signal: abort.signal,
    onListen() {},
    onError: (e) => {
      log.warn("proxy: request failed", { error: String((e as Error)?.message ?? e) });
      return new Response("isx-proxy: internal error\n", { status: 500 });
    },
  }, interceptHandler(o.deps));
  const pool = new UpstreamPool(o.upstreamCaCerts ? { caCerts: o.upstreamCaCerts } : {});
  const deps: RelayDeps = {
    ...o.deps,
    slowPort: slow.addr.port,
    ...(o.upstreamCaCerts ? { upstreamCaCerts: o.upstreamCaCerts } : {}),
  };
  const relays: Relay[] = [];
  const close = async () => {
    await Promise.all(relays.map((r) => r.shutdown()));
    pool.close();
    abort.abort();
    await slow.finished;
  };
  try {
    for (const at of listen) relays.push(serveRelay(listenTls(at, o.leaf), deps, pool));
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
