/**
 * The guest side of a proxy test: a raw HTTP/1.1 client over TLS whose local port names the
 * "instance" (loopback has one source address, so tests tell instances apart by port), and
 * the port-keyed caller lookup that goes with it. Re-exported by upstream.ts, the fake
 * services these requests usually reach.
 *
 * @module
 */

import type { Caller, CallerLookup } from "../../proxy/callers/clients.ts";
import type { CallerRef } from "../../proxy/activity/counter.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A caller lookup that names instances by the client's local port. */
export class PortCallers implements CallerLookup {
  readonly byPort = new Map<number, Caller>();
  instances: CallerRef[] = [];

  /**
   * The caller registered for the client's port. A test registers its port only once its
   * connect has returned, which may be after the proxy accepted, so an unknown port is looked
   * up again for up to 100 ms before it counts as a stranger.
   */
  async identify(addr: { hostname: string; port: number }): Promise<Caller | undefined> {
    const until = Date.now() + 100;
    for (;;) {
      const c = this.byPort.get(addr.port);
      if (c || Date.now() >= until) return c;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  known(): CallerRef[] | undefined {
    return this.instances;
  }
}

/** A parsed HTTP/1.1 response. */
export interface RawResponse {
  status: number;
  headers: Headers;
  body: string;
}

/** A TLS connection to the proxy as a guest would open it (SNI = `serverName`). */
export async function guestConnect(
  opts: { port: number; serverName: string; caCert: string; hostname?: string },
): Promise<{ conn: Deno.TlsConn; localPort: number }> {
  const tcp = await Deno.connect({ hostname: opts.hostname ?? "127.0.0.1", port: opts.port });
  const localPort = (tcp.localAddr as Deno.NetAddr).port;
  const conn = await Deno.startTls(tcp, { hostname: opts.serverName, caCerts: [opts.caCert] });
  return { conn, localPort };
}

/** Writes one request (always `Connection: close`). */
export async function sendRequest(
  conn: Deno.Conn,
  req: {
    method: string;
    host: string;
    path: string;
    headers?: Record<string, string>;
    body?: string;
  },
): Promise<void> {
  const body = req.body === undefined ? undefined : enc.encode(req.body);
  const lines = [`${req.method} ${req.path} HTTP/1.1`, `host: ${req.host}`, "connection: close"];
  for (const [k, v] of Object.entries(req.headers ?? {})) lines.push(`${k}: ${v}`);
  if (body) lines.push(`content-length: ${body.length}`);
  const head = enc.encode(lines.join("\r\n") + "\r\n\r\n");
  const all = new Uint8Array(head.length + (body?.length ?? 0));
  all.set(head);
  if (body) all.set(body, head.length);
  let off = 0;
  while (off < all.length) off += await conn.write(all.subarray(off));
}

/** Reads a whole response until the server closes; decodes chunked bodies. */
export async function readResponse(conn: Deno.Conn): Promise<RawResponse> {
  const raw = new Uint8Array(await new Response(conn.readable).arrayBuffer());
  return parseResponse(raw);
}

/** Parses a complete HTTP/1.1 response. */
export function parseResponse(raw: Uint8Array): RawResponse {
  const text = dec.decode(raw);
  const end = text.indexOf("\r\n\r\n");
  const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
  const headers = new Headers();
  for (const l of lines) {
    const i = l.indexOf(":");
    headers.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
  }
  let body = text.slice(end + 4);
  if (headers.get("transfer-encoding")?.includes("chunked")) {
    let out = "";
    let rest = body;
    for (;;) {
      const nl = rest.indexOf("\r\n");
      const size = parseInt(rest.slice(0, nl), 16);
      if (!size) break;
      const chunkBytes = enc.encode(rest.slice(nl + 2));
      out += dec.decode(chunkBytes.slice(0, size));
      rest = dec.decode(chunkBytes.slice(size + 2));
    }
    body = out;
  }
  return { status: Number(statusLine.split(" ")[1]), headers, body };
}

/** One request on a fresh guest connection registered as `caller`. */
export async function guestRequest(
  callers: PortCallers | undefined,
  o: {
    port: number;
    serverName: string;
    caCert: string;
    caller?: Caller;
    method?: string;
    path: string;
    headers?: Record<string, string>;
    body?: string;
  },
): Promise<RawResponse> {
  const { conn, localPort } = await guestConnect(o);
  if (callers && o.caller) callers.byPort.set(localPort, o.caller);
  try {
    await sendRequest(conn, {
      method: o.method ?? "GET",
      host: o.serverName,
      path: o.path,
      ...(o.headers ? { headers: o.headers } : {}),
      ...(o.body !== undefined ? { body: o.body } : {}),
    });
    return await readResponse(conn);
  } finally {
    callers?.byPort.delete(localPort);
  }
}
