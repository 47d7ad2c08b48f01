/**
 * The explicit forward proxy (guests' `HTTP(S)_PROXY`, port 3128): `CONNECT host:port`
 * tunnels and absolute-form plain-HTTP requests, each counted in the caller's `traffic_*`.
 *
 * A CONNECT to a host the proxy intercepts is not tunnelled blind: it is handed to the
 * intercepting TLS server on loopback (the caller is passed along by the loopback source
 * port), so a tool that ignores `NO_PROXY` still gets credentials injected and counted.
 * Every other target is resolved first (once) and connected to only at an address the guard
 * allows (proxy/egress/guard.ts `targetAllowed`): a public unicast address that is none of
 * the host's own and in none of its interfaces' subnets (the Incus bridges, the LAN). So the
 * forward proxy is never a way into the host, another instance or the host's network, and a
 * name rebound between check and connect changes nothing (the checked address is what is
 * connected to). A refused target and one that cannot be reached get the same answer, byte
 * for byte, so a guest cannot scan the host's ports through it. Plain HTTP is sent with
 * `Connection: close` (one request per connection keeps the relay a byte pipe). Unknown
 * callers get 403. Limits (proxy/callers/limits.ts): the request head must arrive within the header
 * timeout, and a tunnel on which nothing moves for the stream timeout is closed.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import { callerOf, type EgressLookup } from "../callers/admit.ts";
import type { Caller, CallerLookup } from "../callers/clients.ts";
import type { Handoff } from "../callers/handoff.ts";
import type { ActivityCounter } from "../activity/counter.ts";
import type { Policy } from "../config/policy.ts";
import { closeQuietly, type Gate, serveConns, type Served } from "../host/accept.ts";
import { type Guard, type Resolver, targetAllowed } from "../egress/guard.ts";
import { cachedHostNets, dialGuarded, type HostNets, systemResolver } from "../egress/dial.ts";
import { Deadline, DEFAULT_LIMITS, type ProxyLimits } from "../callers/limits.ts";

const HEAD_CAP = 64 * 1024;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** What the forward proxy needs. */
export interface ForwardDeps {
  clients: CallerLookup;
  counter: ActivityCounter;
  policy: Policy;
  egress?: EgressLookup;
  /** Loopback port of the intercepting TLS server for CONNECTs to intercepted hosts. */
  mitmPort?: number;
  /** Where handed-over callers are recorded (shared with the intercepting server). */
  handoff: Handoff;
  /** Extra addresses that count as the host (the proxy's own listen addresses). */
  hostAddresses: ReadonlySet<string>;
  /** Test hook: allow loopback targets (the fake upstreams live there). */
  allowLoopbackTargets?: boolean;
  /** Looks up target names (default: the system's DNS servers). */
  resolve?: Resolver;
  /** The host's addresses and subnets (default: its interfaces, re-read every 2 s). */
  hostNets?: () => HostNets;
  /** Timeouts (default {@link DEFAULT_LIMITS}). */
  limits?: ProxyLimits;
  /** Admits each connection (the per-instance cap); refused ones get 503. */
  gate?: Gate;
  /** The target guard (default: {@link forwardGuard} of these dependencies). */
  guard?: Guard;
}

/** The guard for forward-proxy targets of these dependencies. */
export function forwardGuard(
  deps: Pick<ForwardDeps, "hostAddresses" | "allowLoopbackTargets" | "resolve" | "hostNets">,
): Guard {
  const nets = deps.hostNets ?? cachedHostNets();
  return {
    resolve: deps.resolve ?? systemResolver(),
    allows(ip) {
      const { own, subnets } = nets();
      return targetAllowed(ip, {
        own: new Set([...own, ...deps.hostAddresses]),
        subnets,
        ...(deps.allowLoopbackTargets ? { allowLoopback: true } : {}),
      });
    },
  };
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/**
 * Reads one request head (up to 64 KiB) and what came after it; undefined at the end or
 * over the cap. The buffer starts at 4 KiB and grows only as bytes come, so a stalled head
 * (a slowloris) holds no more than it sent.
 */
export async function readHead(
  conn: Deno.Conn,
): Promise<{ head: string; rest: Uint8Array } | undefined> {
  let buf = new Uint8Array(4096);
  let n = 0;
  while (n < HEAD_CAP) {
    if (n === buf.length) {
      const grown = new Uint8Array(Math.min(HEAD_CAP, buf.length * 4));
      grown.set(buf);
      buf = grown;
    }
    const got = await conn.read(buf.subarray(n));
    if (got === null) return undefined;
    const from = Math.max(0, n - 3);
    n += got;
    const end = headEnd(buf, from, n);
    if (end >= 0) return { head: dec.decode(buf.subarray(0, end)), rest: buf.slice(end + 4, n) };
  }
  return undefined;
}

/** Where `\r\n\r\n` starts in `buf[from, to)`, or -1. */
function headEnd(buf: Uint8Array, from: number, to: number): number {
  for (let i = from; i + 3 < to; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i;
  }
  return -1;
}

/**
 * Copies both ways, counting, half-closing, and closing both when done, or when nothing has
 * moved either way for `idleMs`.
 */
export async function pipeConns(
  a: Deno.Conn,
  b: Deno.Conn,
  count: {
    ab?: (n: number) => void;
    ba?: (n: number) => void;
    idleMs?: number;
    /** Closes both when aborted (the proxy is stopping). */
    signal?: AbortSignal | undefined;
  } = {},
): Promise<void> {
  const close = () => closeQuietly(a, b);
  const idle = new Deadline(); // kicks are no-ops when no idle timeout is set
  if (count.idleMs) idle.set(count.idleMs, close);
  if (count.signal?.aborted) close();
  count.signal?.addEventListener("abort", close, { once: true });
  const copy = async (from: Deno.Conn, to: Deno.Conn, on?: (n: number) => void) => {
    const buf = new Uint8Array(64 * 1024);
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      idle.kick();
      on?.(n);
      await writeAll(to, buf.subarray(0, n));
    }
    await to.closeWrite().catch(() => {});
  };
  try {
    await Promise.all([copy(a, b, count.ab), copy(b, a, count.ba)].map((p) => p.catch(close)));
  } finally {
    idle.stop();
    count.signal?.removeEventListener("abort", close);
    close();
  }
}

function reply(status: string, note = ""): Uint8Array {
  const body = note ? `isx-proxy: ${note}\n` : "";
  return enc.encode(
    `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${
      enc.encode(body).length
    }\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * The one answer for a target that is refused, malformed or cannot be reached: the same
 * bytes whatever the target, so a guest learns nothing about which it was.
 */
export function unreachable(): Uint8Array {
  return reply("502 Bad Gateway", "cannot connect to the requested target");
}

/**
 * `host:port` (or `[v6]:port`) → the host's text (lowercased, brackets kept, not yet parsed:
 * proxy/egress/address.ts does that once, in the dial) and port (`defaultPort` when none is
 * given); undefined for anything else (a bare IPv6, a port out of range).
 */
export function splitAuthority(
  authority: string,
  defaultPort: number,
): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]*\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!m) return undefined;
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: m[1]!.toLowerCase(), port };
}

/** Serves one forward-proxy connection to its end. */
export async function handleForward(
  conn: Deno.Conn,
  deps: ForwardDeps,
  stopping?: AbortSignal,
): Promise<void> {
  let upstream: Deno.Conn | undefined;
  const limits = deps.limits ?? DEFAULT_LIMITS;
  const timer = setTimeout(() => conn.close(), limits.headerTimeoutMs);
  const guard = deps.guard ?? forwardGuard(deps);
  try {
    const caller = await callerOf({ clients: deps.clients }, conn.remoteAddr as Deno.NetAddr);
    const got = caller ? await readHead(conn) : undefined;
    clearTimeout(timer);
    if (!caller) {
      deps.counter.refusal({
        kind: "unknown_caller",
        instance: null,
        target: (conn.remoteAddr as Deno.NetAddr).hostname,
        reason: "forward proxy: this address belongs to no instance",
      });
      return await writeAll(conn, reply("403 Forbidden", "this address belongs to no instance"));
    }
    if (caller.pooled) {
      // an unclaimed warm-pool member (mcp/pool/) is nobody's: no tunnel, nothing counted
      return await writeAll(
        conn,
        reply("403 Forbidden", "this instance is a warm-pool member, not claimed yet"),
      );
    }
    if (!got) return;
    const [method = "", target = ""] = got.head.split("\r\n", 1)[0]!.split(" ");
    if (method === "CONNECT") {
      const authority = splitAuthority(target, 443);
      if (!authority) return await writeAll(conn, unreachable());
      const { host, port } = authority;
      const intercepted = deps.policy.covers(host) || deps.egress?.covers(caller, host);
      if (intercepted && port === 443 && deps.mitmPort) {
        upstream = await Deno.connect({ hostname: "127.0.0.1", port: deps.mitmPort });
        const local = (upstream.localAddr as Deno.NetAddr).port;
        deps.handoff.set(deps.mitmPort, local, caller);
        try {
          await writeAll(conn, enc.encode("HTTP/1.1 200 Connection Established\r\n\r\n"));
          if (got.rest.length) await writeAll(upstream, got.rest);
          await pipeConns(conn, upstream, { idleMs: limits.streamIdleMs, signal: stopping });
        } finally {
          deps.handoff.delete(deps.mitmPort, local);
        }
        return;
      }
      return await tunnel(conn, { ...deps, guard, stopping }, caller, {
        host,
        port,
        first: got.rest,
        head: undefined,
      });
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return await writeAll(
        conn,
        reply("400 Bad Request", "expected CONNECT or an absolute http:// URL"),
      );
    }
    if (url.protocol !== "http:") {
      return await writeAll(conn, reply("400 Bad Request", "only http:// is forwarded"));
    }
    // The host dialled is the target's own text, parsed once in the dial, not the URL
    // parser's rewrite of it (which reads 012 as octal, %31 as 1 and takes user info).
    const authority = splitAuthority(/^http:\/\/([^/?#]*)/i.exec(target)?.[1] ?? "", 80);
    if (!authority) return await writeAll(conn, unreachable());
    const lines = got.head.split("\r\n").slice(1).filter((l) =>
      !/^(proxy-connection|proxy-authorization|connection|keep-alive)\s*:/i.test(l)
    );
    const head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\n${
      lines.join("\r\n")
    }\r\nconnection: close\r\n\r\n`;
    return await tunnel(conn, { ...deps, guard, stopping }, caller, {
      host: authority.host,
      port: authority.port,
      first: got.rest,
      head: enc.encode(head),
    });
  } catch (e) {
    log.debug("proxy: forward connection failed", { error: String((e as Error)?.message ?? e) });
  } finally {
    clearTimeout(timer);
    closeQuietly(conn, upstream);
  }
}

async function tunnel(
  conn: Deno.Conn,
  deps: ForwardDeps & { guard: Guard; stopping: AbortSignal | undefined },
  caller: Caller,
  t: { host: string; port: number; first: Uint8Array; head: Uint8Array | undefined },
): Promise<void> {
  const traffic = deps.counter.traffic(caller);
  let upstream: Deno.Conn | undefined;
  try {
    try {
      upstream = await dialGuarded(t.host, t.port, deps.guard);
    } catch (e) {
      // Refused or unreachable: one answer, so the guest learns nothing about which.
      if (e instanceof IsbError && e.code === "forbidden") {
        deps.counter.refusal({
          kind: "forward_target",
          instance: caller.name,
          target: `${t.host}:${t.port}`,
          reason: "not a public address",
        });
      }
      log.debug("proxy: forward target refused or unreachable", {
        instance: caller.name,
        error: String((e as Error)?.message ?? e),
      });
      return await writeAll(conn, unreachable());
    }
    traffic.responded();
    if (t.head) {
      traffic.sent(t.head.length);
      await writeAll(upstream, t.head);
    } else {
      await writeAll(conn, enc.encode("HTTP/1.1 200 Connection Established\r\n\r\n"));
    }
    if (t.first.length) {
      traffic.sent(t.first.length);
      await writeAll(upstream, t.first);
    }
    await pipeConns(conn, upstream, {
      ab: (n) => traffic.sent(n),
      ba: (n) => traffic.received(n),
      idleMs: (deps.limits ?? DEFAULT_LIMITS).streamIdleMs,
      signal: deps.stopping,
    });
  } finally {
    traffic.end();
    closeQuietly(upstream);
  }
}

/** A running forward proxy. */
export type ForwardServer = Served;

/** Accepts forward-proxy connections on `listener`. */
export function serveForward(listener: Deno.Listener, deps: ForwardDeps): ForwardServer {
  const guarded = { ...deps, guard: forwardGuard(deps) };
  return serveConns(
    listener,
    (conn, stop) => handleForward(conn, guarded, stop),
    "forward listener",
    {
      gate: deps.gate,
      refuse: (conn) =>
        writeAll(conn, reply("503 Service Unavailable", "too many connections from this instance")),
    },
  );
}
