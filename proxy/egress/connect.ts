/**
 * The guarded connector of an isb egress bridge: what the intercepting `Deno.serve` path
 * (WebSocket upgrades, HTTP/1.0, absolute-form targets; proxy/relay/server.ts) sends its upstream
 * `fetch` and `WebSocket` through. Those resolve names by themselves, which would let an
 * allowed name rebound to a private address reach it; given an HTTP client whose proxy is
 * this loopback `CONNECT` endpoint instead, they get only tunnels the egress guard allows:
 * the name resolved once, every answer checked, the connection made to a checked address
 * (proxy/egress/dial.ts). TLS stays end to end between Deno's client and the service (the
 * name is still what is verified). Anything but a `CONNECT` gets 405; a refused or failed
 * tunnel 502. Only loopback reaches it, and it reaches only what the guard allows, so it
 * gives a local process nothing it could not do itself.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { closeQuietly, serveConns } from "../host/accept.ts";
import { dialGuarded } from "./dial.ts";
import type { Guard } from "./guard.ts";
import { pipeConns, readHead, splitAuthority, unreachable } from "../relay/forward.ts";
import { DEFAULT_LIMITS, type ProxyLimits } from "../callers/limits.ts";

const enc = new TextEncoder();

/** A running connector and the HTTP client that uses it. */
export interface GuardedConnector {
  /** `fetch`/`WebSocket` client whose every connection is a guarded tunnel. */
  client: Deno.HttpClient;
  /** Stops it (and closes the client). */
  close(): Promise<void>;
}

async function serveOne(
  conn: Deno.Conn,
  guard: Guard,
  limits: ProxyLimits,
  stopping: AbortSignal,
): Promise<void> {
  const timer = setTimeout(() => conn.close(), limits.headerTimeoutMs);
  let upstream: Deno.Conn | undefined;
  try {
    const got = await readHead(conn);
    clearTimeout(timer);
    if (!got) return;
    const [method = "", target = ""] = got.head.split("\r\n", 1)[0]!.split(" ");
    if (method !== "CONNECT") {
      await conn.write(enc.encode("HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n"));
      return;
    }
    const authority = splitAuthority(target, 443);
    try {
      if (!authority) throw new TypeError(`not host:port: ${JSON.stringify(target)}`);
      upstream = await dialGuarded(authority.host, authority.port, guard);
    } catch (e) {
      log.warn("proxy: egress upstream refused", { error: String((e as Error)?.message ?? e) });
      await conn.write(unreachable());
      return;
    }
    await conn.write(enc.encode("HTTP/1.1 200 Connection Established\r\n\r\n"));
    if (got.rest.length) await upstream.write(got.rest);
    await pipeConns(conn, upstream, { idleMs: limits.streamIdleMs, signal: stopping });
  } catch (e) {
    log.debug("proxy: egress connector", { error: String((e as Error)?.message ?? e) });
  } finally {
    clearTimeout(timer);
    closeQuietly(conn, upstream);
  }
}

/** Starts a connector on a loopback port for `guard`; `caCerts` are trusted upstream (tests). */
export function serveGuardedConnector(
  guard: Guard,
  opts: { limits?: ProxyLimits; caCerts?: string[] } = {},
): GuardedConnector {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const served = serveConns(
    listener,
    (conn, stop) => serveOne(conn, guard, opts.limits ?? DEFAULT_LIMITS, stop),
    "egress connector",
  );
  const client = Deno.createHttpClient({
    proxy: { url: `http://127.0.0.1:${served.addr.port}` },
    ...(opts.caCerts ? { caCerts: opts.caCerts } : {}),
  });
  return {
    client,
    async close() {
      client.close();
      await served.shutdown();
    },
  };
}
