/**
 * WebSocket upgrades on intercepted hosts (Codex speaks the Responses API over one): the
 * upstream socket is opened first, with the same injected head as any request, so the guest
 * is answered with the subprotocol the service chose; then messages are relayed both ways.
 * Every message coming back, text or binary, and the upstream's close reason are scrubbed of
 * real values (each message on its own: a value split across two messages is not seen). The
 * socket counts as one request, and as a WebSocket in flight, until either side closes.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import type { TrafficCall } from "../activity/counter.ts";
import { scrubText } from "./rewrite.ts";
import { Scrubber } from "./scrub.ts";
import type { Secret } from "../config/secret.ts";

const WS_HEAD = [
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-extensions",
  "sec-websocket-protocol",
  "host",
];

function size(data: unknown): number {
  if (typeof data === "string") return new TextEncoder().encode(data).length;
  if (data instanceof ArrayBuffer) return data.byteLength;
  if (data instanceof Blob) return data.size;
  return 0;
}

function openSocket(ws: WebSocket): Promise<boolean> {
  return new Promise((resolve) => {
    ws.addEventListener("open", () => resolve(true), { once: true });
    ws.addEventListener("error", () => resolve(false), { once: true });
    ws.addEventListener("close", () => resolve(false), { once: true });
  });
}

/** Opens the upstream socket, then upgrades the guest's request and relays both ways. */
export async function relayWebSocket(
  req: Request,
  o: {
    target: string;
    headers: Headers;
    traffic: TrafficCall;
    secrets: readonly Secret[];
    client?: Deno.HttpClient;
  },
): Promise<Response> {
  const headers = new Headers(o.headers);
  for (const h of WS_HEAD) headers.delete(h);
  const protocols = (req.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) =>
    p.trim()
  )
    .filter(Boolean);
  const url = o.target.replace(/^http/, "ws");
  const upstream = new WebSocket(url, {
    protocols,
    headers,
    ...(o.client ? { client: o.client } : {}),
  });
  upstream.binaryType = "arraybuffer";
  if (!(await openSocket(upstream))) {
    o.traffic.end();
    upstream.close();
    return new Response(`isx-proxy: upstream WebSocket ${new URL(url).host} refused\n`, {
      status: 502,
    });
  }
  const { socket, response } = Deno.upgradeWebSocket(
    req,
    upstream.protocol ? { protocol: upstream.protocol } : {},
  );
  socket.binaryType = "arraybuffer";
  o.traffic.responded();
  const pending: (string | ArrayBuffer)[] = [];
  let ended = false;
  const end = (code?: number, reason?: string) => {
    if (ended) return;
    ended = true;
    o.traffic.end();
    for (const ws of [socket, upstream]) {
      try {
        if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) {
          ws.close(code && code >= 3000 || code === 1000 ? code : 1000, reason?.slice(0, 100));
        }
      } catch (e) {
        log.debug("proxy: websocket close", { error: String(e) });
      }
    }
  };
  socket.onopen = () => {
    for (const m of pending.splice(0)) socket.send(m);
  };
  socket.onmessage = (ev) => {
    o.traffic.sent(size(ev.data));
    if (upstream.readyState === WebSocket.OPEN) upstream.send(ev.data);
  };
  // Masks in place: each binary message is its own buffer, scanned whole.
  const scrub = Scrubber.of(o.secrets);
  upstream.onmessage = (ev) => {
    let data: string | ArrayBuffer;
    if (typeof ev.data === "string") data = scrubText(ev.data, o.secrets);
    else {
      data = ev.data as ArrayBuffer;
      const bytes = new Uint8Array(data);
      scrub.scan(bytes, bytes.length, true);
    }
    o.traffic.received(size(data));
    if (socket.readyState === WebSocket.OPEN) socket.send(data);
    else if (socket.readyState === WebSocket.CONNECTING) pending.push(data);
  };
  socket.onclose = (ev) => end(ev.code, ev.reason);
  upstream.onclose = (ev) => end(ev.code, scrubText(ev.reason, o.secrets));
  socket.onerror = () => end();
  upstream.onerror = () => end();
  return response;
}
