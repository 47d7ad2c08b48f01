/**
 * A minimal RFC 6455 websocket client on `Deno.connect` (unix socket) or `Deno.connectTls`
 * (remote incusd with a client certificate): what exec streams and `/1.0/events` need and
 * nothing more (no extensions, no subprotocols).
 *
 * Why not npm `ws`: under Deno it runs on the node:net shim, which sometimes connects a
 * socket and never writes the upgrade request. incusd's unix listener peeks the first
 * bytes of each connection inside `Accept()`, so one silent connection stalls every new
 * client of the daemon (docs/decisions.md). Here the request is written right after the
 * connect, and reading is a plain loop, so `pause()` is exact backpressure.
 *
 * @module
 */

import { IsbError } from "../errors.ts";

/** Where to dial: a unix socket, or host/port with TLS material. */
export type WsTarget =
  | { socket: string }
  | { hostname: string; port: number; cert: string; key: string; caCerts?: string[] };

type Listener = (...args: never[]) => void;
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** `readyState` values, as the WHATWG WebSocket names them. */
export const CONNECTING = 0, OPEN = 1, CLOSING = 2, CLOSED = 3;

/** One client websocket; events: `message(data, isBinary)`, `close(code)`, `error(err)`. */
export class WsClient {
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readyState: number = CONNECTING;
  #conn: Deno.Conn | undefined;
  #buf: Uint8Array = new Uint8Array(0);
  #listeners = new Map<string, Set<Listener>>();
  #writing: Promise<void> = Promise.resolve();
  #paused: PromiseWithResolvers<void> | undefined;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  #aborted = false;

  /** Adds a listener for each frame (continuations already joined). */
  on(event: "message", fn: (data: Uint8Array, isBinary: boolean) => void): this;
  /** Adds a listener for the end of the connection (1006 when dropped without a close). */
  on(event: "close", fn: (code: number) => void): this;
  /** Adds a listener for read failures while open ("close" follows). */
  on(event: "error", fn: (e: Error) => void): this;
  on(event: string, fn: Listener): this {
    if (!this.#listeners.has(event)) this.#listeners.set(event, new Set());
    this.#listeners.get(event)!.add(fn);
    return this;
  }

  /** True while reading is paused. */
  get isPaused(): boolean {
    return this.#paused !== undefined;
  }

  /** Stops reading from the socket (the peer then blocks once buffers fill). */
  pause(): void {
    this.#paused ??= Promise.withResolvers();
  }

  /** Resumes reading. */
  resume(): void {
    this.#paused?.resolve();
    this.#paused = undefined;
  }

  /** Dials, sends the upgrade request and checks the answer; then starts reading. */
  async connect(target: WsTarget, path: string): Promise<void> {
    this.#conn = "socket" in target
      ? await Deno.connect({ transport: "unix", path: target.socket })
      : await Deno.connectTls({
        hostname: target.hostname,
        port: target.port,
        cert: target.cert,
        key: target.key,
        ...(target.caCerts ? { caCerts: target.caCerts } : {}),
      });
    if (this.#aborted) {
      this.#conn.close(); // terminated while dialling
      throw new IsbError("websocket", "websocket: closed while connecting");
    }
    const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    const host = "socket" in target ? "incus" : `${target.hostname}:${target.port}`;
    const head = `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\n` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
    await this.#write(new TextEncoder().encode(head));
    await this.#handshake(key, path.split("?", 1)[0] ?? path);
    this.readyState = OPEN;
    void this.#readLoop();
  }

  /** Sends one frame; resolves once written. */
  send(data: Uint8Array | string, binary: boolean): Promise<void> {
    if (this.readyState !== OPEN) {
      return Promise.reject(new IsbError("websocket", "websocket send: socket is closed"));
    }
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return this.#frame(binary ? 2 : 1, bytes);
  }

  /** Starts the closing handshake; the socket is dropped if the peer does not answer in 2 s. */
  close(code = 1000): void {
    if (this.readyState !== OPEN) return;
    this.readyState = CLOSING;
    void this.#frame(8, new Uint8Array([code >> 8, code & 255])).catch(() => {});
    this.#closeTimer = setTimeout(() => this.terminate(), 2000);
  }

  /** Drops the connection now. */
  terminate(): void {
    this.#aborted = true;
    if (this.readyState === CLOSED) return;
    this.readyState = CLOSING;
    this.resume();
    try {
      this.#conn?.close();
    } catch { /* already closed */ }
    this.#conn = undefined;
  }

  #emit(event: string, ...args: unknown[]): void {
    for (const fn of this.#listeners.get(event) ?? []) (fn as (...a: unknown[]) => void)(...args);
  }

  async #handshake(key: string, where: string): Promise<void> {
    let end = -1;
    while ((end = indexOfHeadEnd(this.#buf)) < 0) {
      if (!await this.#fill()) throw new IsbError("websocket", `open websocket ${where}: closed`);
    }
    const head = new TextDecoder().decode(this.#buf.subarray(0, end));
    this.#buf = this.#buf.slice(end + 4);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
    if (status !== 101) {
      throw new IsbError("websocket", `open websocket ${where}: HTTP ${status || "?"}`, {
        /** The file's bytes. */
        data: { status },
      });
    }
    const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(key + GUID));
    const accept = btoa(String.fromCharCode(...new Uint8Array(digest)));
    if (!new RegExp(`\r\nsec-websocket-accept:\\s*${escape(accept)}\\s*(\r\n|$)`, "i").test(head)) {
      throw new IsbError("websocket", `open websocket ${where}: bad Sec-WebSocket-Accept`);
    }
  }

  async #readLoop(): Promise<void> {
    let code = 1006;
    const parts: Uint8Array[] = [];
    let partsBinary = false;
    try {
      while (true) {
        const f = await this.#readFrame();
        if (!f) break;
        while (this.#paused) await this.#paused.promise; // hold the frame: exact backpressure
        if (f.opcode === 8) {
          code = f.payload.length >= 2 ? (f.payload[0]! << 8) | f.payload[1]! : 1005;
          if (this.readyState === OPEN) await this.#frame(8, f.payload.slice(0, 2)).catch(() => {});
          break;
        }
        if (f.opcode === 9) {
          await this.#frame(10, f.payload).catch(() => {});
          continue;
        }
        if (f.opcode === 10) continue;
        if (f.opcode !== 0) partsBinary = f.opcode === 2;
        parts.push(f.payload);
        if (!f.fin) continue;
        const data = parts.length === 1 ? parts[0]! : concat(parts);
        parts.length = 0;
        this.#emit("message", data, partsBinary);
      }
    } catch (e) {
      if (this.readyState === OPEN) this.#emit("error", e);
    } finally {
      clearTimeout(this.#closeTimer);
      this.terminate();
      this.readyState = CLOSED;
      this.#emit("close", code);
    }
  }

  async #readFrame(): Promise<{ fin: boolean; opcode: number; payload: Uint8Array } | null> {
    if (!await this.#need(2)) return null;
    const b0 = this.#buf[0]!, b1 = this.#buf[1]!;
    let len = b1 & 127;
    let off = 2;
    if (len === 126) {
      if (!await this.#need(4)) return null;
      len = (this.#buf[2]! << 8) | this.#buf[3]!;
      off = 4;
    } else if (len === 127) {
      if (!await this.#need(10)) return null;
      len = Number(new DataView(this.#buf.buffer, this.#buf.byteOffset + 2, 8).getBigUint64(0));
      off = 10;
    }
    const masked = (b1 & 128) !== 0;
    const total = off + (masked ? 4 : 0) + len;
    if (!await this.#need(total)) return null;
    let payload: Uint8Array = this.#buf.slice(total - len, total);
    if (masked) payload = mask(payload, this.#buf.subarray(off, off + 4));
    this.#buf = this.#buf.subarray(total);
    return { fin: (b0 & 128) !== 0, opcode: b0 & 15, payload };
  }

  async #need(n: number): Promise<boolean> {
    while (this.#buf.length < n) if (!await this.#fill()) return false;
    return true;
  }

  async #fill(): Promise<boolean> {
    if (!this.#conn) return false;
    const chunk = new Uint8Array(64 * 1024);
    const n = await this.#conn.read(chunk);
    if (n === null) return false;
    this.#buf = this.#buf.length ? concat([this.#buf, chunk.subarray(0, n)]) : chunk.slice(0, n);
    return true;
  }

  #frame(opcode: number, payload: Uint8Array): Promise<void> {
    const len = payload.length;
    const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
    const out = new Uint8Array(2 + ext + 4 + len);
    out[0] = 128 | opcode;
    out[1] = 128 | (ext === 0 ? len : ext === 2 ? 126 : 127);
    const dv = new DataView(out.buffer);
    if (ext === 2) dv.setUint16(2, len);
    if (ext === 8) dv.setBigUint64(2, BigInt(len));
    const key = crypto.getRandomValues(new Uint8Array(4));
    out.set(key, 2 + ext);
    out.set(mask(payload, key), 6 + ext);
    return this.#write(out);
  }

  #write(data: Uint8Array): Promise<void> {
    const run = async () => {
      for (let off = 0; off < data.length;) {
        if (!this.#conn) throw new IsbError("websocket", "websocket send: socket is closed");
        off += await this.#conn.write(data.subarray(off));
      }
    };
    const next = this.#writing.then(run);
    this.#writing = next.catch(() => {});
    return next;
  }
}

function mask(data: Uint8Array, key: Uint8Array): Uint8Array {
  const out = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = data[i]! ^ key[i & 3]!;
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function indexOfHeadEnd(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}

function escape(s: string): string {
  return s.replace(/[+/=]/g, (c) => `\\${c}`);
}
