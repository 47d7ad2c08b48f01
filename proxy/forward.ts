/**
 * The explicit forward proxy (guests' `HTTP(S)_PROXY`, port 3128): `CONNECT host:port`
 * tunnels and absolute-form plain-HTTP requests, each counted in the caller's `traffic_*`.
 *
 * A CONNECT to a host the proxy intercepts is not tunnelled blind: it is handed to the
 * intercepting TLS server on loopback (the caller is passed along by the loopback source
 * port), so a tool that ignores `NO_PROXY` still gets credentials injected and counted.
 * Every other target is connected first and refused if it turns out to be the host itself
 * (loopback, link-local, unspecified, or one of the proxy's own addresses), so the forward
 * proxy is never a way into host-only services. Plain HTTP is sent with `Connection: close`
 * (one request per connection keeps the relay a byte pipe). Unknown callers get 403.
 *
 * @module
 */

import { log } from "../rpc/mod.ts";
import { callerOf, type EgressLookup } from "./admit.ts";
import type { Caller, CallerLookup } from "./clients.ts";
import type { Handoff } from "./handoff.ts";
import { normalizeAddress } from "./clients.ts";
import type { ActivityCounter } from "./counter.ts";
import { hostOnly, type Policy } from "./policy.ts";
import { isLoopback } from "./upstream.ts";
import { serveConns, type Served } from "./accept.ts";

const HEAD_CAP = 64 * 1024;
const HEAD_TIMEOUT_MS = 30_000;
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
}

/** True for targets a guest must not reach through the proxy. */
export function deniedTarget(
  address: string,
  deps: Pick<ForwardDeps, "hostAddresses" | "allowLoopbackTargets">,
): boolean {
  const a = normalizeAddress(address);
  if (isLoopback(a)) return !deps.allowLoopbackTargets;
  if (deps.hostAddresses.has(a)) return true;
  return a === "::" || /^0\./.test(a) || /^169\.254\./.test(a) || /^fe[89ab][0-9a-f]:/.test(a) ||
    /^(22[4-9]|23\d)\./.test(a) || /^ff/.test(a);
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

async function readHead(conn: Deno.Conn): Promise<{ head: string; rest: Uint8Array } | undefined> {
  const buf = new Uint8Array(HEAD_CAP);
  let n = 0;
  while (n < HEAD_CAP) {
    const got = await conn.read(buf.subarray(n));
    if (got === null) return undefined;
    n += got;
    const text = dec.decode(buf.subarray(0, n));
    const end = text.indexOf("\r\n\r\n");
    if (end >= 0) {
      const headLen = enc.encode(text.slice(0, end + 4)).length;
      return { head: text.slice(0, end), rest: buf.slice(headLen, n) };
    }
  }
  return undefined;
}

/** Copies both ways, counting, half-closing, and closing both when done. */
export async function pipeConns(
  a: Deno.Conn,
  b: Deno.Conn,
  count: { ab?: (n: number) => void; ba?: (n: number) => void } = {},
): Promise<void> {
  const copy = async (from: Deno.Conn, to: Deno.Conn, on?: (n: number) => void) => {
    const buf = new Uint8Array(64 * 1024);
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      on?.(n);
      await writeAll(to, buf.subarray(0, n));
    }
    await to.closeWrite().catch(() => {});
  };
  const close = () => {
    for (const c of [a, b]) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
  };
  await Promise.all([copy(a, b, count.ab), copy(b, a, count.ba)].map((p) => p.catch(close)));
  close();
}

function reply(status: string, note = ""): Uint8Array {
  const body = note ? `isx-proxy: ${note}\n` : "";
  return enc.encode(
    `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${
      enc.encode(body).length
    }\r\nconnection: close\r\n\r\n${body}`,
  );
}

function splitAuthority(authority: string, defaultPort: number): { host: string; port: number } {
  const host = hostOnly(authority);
  const m = /:(\d+)$/.exec(authority.replace(/^\[[^\]]*\]/, ""));
  return { host, port: m ? Number(m[1]) : defaultPort };
}

/** Serves one forward-proxy connection to its end. */
export async function handleForward(conn: Deno.Conn, deps: ForwardDeps): Promise<void> {
  let upstream: Deno.Conn | undefined;
  const timer = setTimeout(() => conn.close(), HEAD_TIMEOUT_MS);
  try {
    const caller = await callerOf({ clients: deps.clients }, conn.remoteAddr as Deno.NetAddr);
    const got = caller ? await readHead(conn) : undefined;
    clearTimeout(timer);
    if (!caller) {
      return await writeAll(conn, reply("403 Forbidden", "this address belongs to no instance"));
    }
    if (!got) return;
    const [method = "", target = ""] = got.head.split("\r\n", 1)[0]!.split(" ");
    if (method === "CONNECT") {
      const { host, port } = splitAuthority(target, 443);
      const intercepted = deps.policy.covers(host) || deps.egress?.covers(caller, host);
      if (intercepted && port === 443 && deps.mitmPort) {
        upstream = await Deno.connect({ hostname: "127.0.0.1", port: deps.mitmPort });
        const local = (upstream.localAddr as Deno.NetAddr).port;
        deps.handoff.set(deps.mitmPort, local, caller);
        try {
          await writeAll(conn, enc.encode("HTTP/1.1 200 Connection Established\r\n\r\n"));
          if (got.rest.length) await writeAll(upstream, got.rest);
          await pipeConns(conn, upstream);
        } finally {
          deps.handoff.delete(deps.mitmPort, local);
        }
        return;
      }
      return await tunnel(conn, deps, caller, { host, port, first: got.rest, head: undefined });
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
    const lines = got.head.split("\r\n").slice(1).filter((l) =>
      !/^(proxy-connection|proxy-authorization|connection|keep-alive)\s*:/i.test(l)
    );
    const head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\n${
      lines.join("\r\n")
    }\r\nconnection: close\r\n\r\n`;
    const port = url.port ? Number(url.port) : 80;
    return await tunnel(conn, deps, caller, {
      host: hostOnly(url.host),
      port,
      first: got.rest,
      head: enc.encode(head),
    });
  } catch (e) {
    log.debug("proxy: forward connection failed", { error: String((e as Error)?.message ?? e) });
  } finally {
    clearTimeout(timer);
    for (const c of [conn, upstream]) {
      try {
        c?.close();
      } catch { /* already closed */ }
    }
  }
}

async function tunnel(
  conn: Deno.Conn,
  deps: ForwardDeps,
  caller: Caller,
  t: { host: string; port: number; first: Uint8Array; head: Uint8Array | undefined },
): Promise<void> {
  const traffic = deps.counter.traffic(caller);
  let upstream: Deno.Conn | undefined;
  try {
    try {
      upstream = await Deno.connect({ hostname: t.host, port: t.port });
    } catch (e) {
      return await writeAll(
        conn,
        reply("502 Bad Gateway", `connect ${t.host}:${t.port}: ${(e as Error).name}`),
      );
    }
    if (deniedTarget((upstream.remoteAddr as Deno.NetAddr).hostname, deps)) {
      return await writeAll(conn, reply("403 Forbidden", `${t.host} is the host itself`));
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
    await pipeConns(conn, upstream, { ab: (n) => traffic.sent(n), ba: (n) => traffic.received(n) });
  } finally {
    traffic.end();
    try {
      upstream?.close();
    } catch { /* already closed */ }
  }
}

/** A running forward proxy. */
export type ForwardServer = Served;

/** Accepts forward-proxy connections on `listener`. */
export function serveForward(listener: Deno.Listener, deps: ForwardDeps): ForwardServer {
  return serveConns(listener, (conn) => handleForward(conn, deps), "forward listener");
}
