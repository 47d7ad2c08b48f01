/**
 * One HTTP/1.1 exchange with incusd over its unix socket, on a connection of its own:
 * connect, write the whole request at once, read the response to the end, close.
 *
 * Why not `fetch` with `Deno.createHttpClient({proxy: {transport: "unix"}})`: its pool
 * (hyper) opens connections ahead of need and leaves them silent, and incusd reads the first
 * bytes of every new connection before it accepts the next one, so a silent connection stalls
 * every client of the daemon (the `incus` CLI included) until incusd gives up on it. With
 * pooling on, requests hung now and then for the whole deadline; with `poolMaxIdlePerHost: 0`
 * a single client managed 6 requests a second. This exchange never opens a connection it does
 * not write to at once, and measured 305 requests a second one at a time and 440 with 200 in
 * flight (see docs/decisions.md).
 *
 * The response parser reads a status line, headers and a body delimited by
 * `Content-Length`, `Transfer-Encoding: chunked` or the end of the connection (the request
 * says `Connection: close`).
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { ResponseHeaders } from "./response_headers.ts";

/** What {@link unixExchange} sends. */
export interface UnixRequest {
  /** HTTP method. */
  method: string;
  /** Path with its query string. */
  path: string;
  /** Request headers (lower-case names); `host`, `connection` and `content-length` are set here. */
  headers: Record<string, string>;
  /** The request body, if any. */
  body?: Uint8Array;
}

/** A complete response. */
export interface UnixResponse {
  /** HTTP status code. */
  status: number;
  /** Response headers. */
  headers: ResponseHeaders;
  /** The whole body, transfer coding removed. */
  body: Uint8Array;
}

const CRLF2 = [13, 10, 13, 10];
const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Sends `req` on a fresh connection to `socket` and reads the whole response. `signal` aborts
 * the exchange (the connection is closed). Throws the OS error of a failed connect as is (the
 * caller maps it), `protocol` for a response that is not HTTP, `io` for a connection that
 * ends early.
 */
export async function unixExchange(
  socket: string,
  req: UnixRequest,
  signal: AbortSignal,
): Promise<UnixResponse> {
  signal.throwIfAborted();
  const conn = await Deno.connect({ transport: "unix", path: socket });
  const abort = () => {
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  signal.addEventListener("abort", abort, { once: true });
  try {
    await writeAll(conn, encodeRequest(req));
    return await readResponse(conn, req.method === "HEAD");
  } catch (e) {
    signal.throwIfAborted();
    throw e;
  } finally {
    signal.removeEventListener("abort", abort);
    abort();
  }
}

/** The request's bytes: head and body in one buffer, so it goes out in one write. */
export function encodeRequest(req: UnixRequest): Uint8Array {
  if (/[\s]/.test(req.method + req.path)) {
    throw new TypeError(
      `request line: whitespace in ${JSON.stringify(req.method + " " + req.path)}`,
    );
  }
  const lines = [`${req.method} ${req.path} HTTP/1.1`, "host: incus", "connection: close"];
  for (const [k, v] of Object.entries(req.headers)) {
    const key = k.toLowerCase();
    if (key === "host" || key === "connection" || key === "content-length") continue;
    if (/[\r\n]/.test(k + v)) throw new TypeError(`header ${k}: line breaks are not allowed`);
    lines.push(`${key}: ${v}`);
  }
  const body = req.body ?? new Uint8Array();
  if (req.body !== undefined || !["GET", "HEAD", "DELETE"].includes(req.method)) {
    lines.push(`content-length: ${body.length}`);
  }
  const head = enc.encode(lines.join("\r\n") + "\r\n\r\n");
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** Reads one response from `r` (a connection, or any reader in tests). */
export async function readResponse(
  r: { read(p: Uint8Array): Promise<number | null> },
  headOnly = false,
): Promise<UnixResponse> {
  const buf = new Buffered(r);
  const headEnd = await buf.fill(CRLF2);
  if (headEnd < 0) {
    throw buf.size === 0
      ? new IsbError("io", "connection to incusd failed: connection closed without an answer")
      : new IsbError("protocol", "bad response from incusd: the headers never ended");
  }
  const head = dec.decode(buf.take(headEnd + 4)).split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(head[0] ?? "");
  if (!m) {
    throw new IsbError(
      "protocol",
      `bad response from incusd: not HTTP: ${JSON.stringify((head[0] ?? "").slice(0, 60))}`,
    );
  }
  const headers = new ResponseHeaders();
  for (const line of head.slice(1)) {
    if (!line) continue;
    const i = line.indexOf(":");
    if (i <= 0) throw new IsbError("protocol", `bad response from incusd: header line "${line}"`);
    try {
      headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
    } catch {
      throw new IsbError("protocol", `bad response from incusd: header line "${line}"`);
    }
  }
  const status = Number(m[1]);
  if (headOnly || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { status, headers, body: new Uint8Array() };
  }
  const te = headers.get("transfer-encoding");
  if (te && /chunked/i.test(te)) return { status, headers, body: await readChunked(buf) };
  const cl = headers.get("content-length");
  if (cl !== null) {
    const n = Number(cl);
    if (!Number.isSafeInteger(n) || n < 0) {
      throw new IsbError("protocol", `bad response from incusd: content-length "${cl}"`);
    }
    if (!(await buf.ensure(n))) throw early();
    return { status, headers, body: buf.take(n) };
  }
  await buf.ensure(Infinity);
  return { status, headers, body: buf.take(buf.size) };
}

async function readChunked(buf: Buffered): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const eol = await buf.fill([13, 10]);
    if (eol < 0) throw early();
    const line = dec.decode(buf.take(eol + 2)).trim();
    const size = parseInt(line.split(";", 1)[0] ?? "", 16);
    if (!/^[0-9a-fA-F]+/.test(line) || !Number.isSafeInteger(size)) {
      throw new IsbError("protocol", `bad response from incusd: chunk size "${line.slice(0, 20)}"`);
    }
    if (size === 0) {
      // trailers (none expected), then the final CRLF
      for (;;) {
        const end = await buf.fill([13, 10]);
        if (end < 0) return concat(parts, total); // the server closed right after the last chunk
        const trailer = buf.take(end + 2);
        if (trailer.length === 2) return concat(parts, total);
      }
    }
    if (!(await buf.ensure(size + 2))) throw early();
    parts.push(buf.take(size));
    total += size;
    buf.take(2);
  }
}

function early(): IsbError {
  return new IsbError("io", "connection to incusd failed: connection closed mid-response");
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** A growing read buffer over a reader. */
class Buffered {
  #r: { read(p: Uint8Array): Promise<number | null> };
  #data = new Uint8Array(64 * 1024);
  #start = 0;
  #end = 0;
  #eof = false;

  constructor(r: { read(p: Uint8Array): Promise<number | null> }) {
    this.#r = r;
  }

  get size(): number {
    return this.#end - this.#start;
  }

  /** Reads more; false at the end of the stream. */
  async #more(): Promise<boolean> {
    if (this.#eof) return false;
    if (this.#end === this.#data.length) {
      const live = this.size;
      const next = live * 2 > this.#data.length
        ? new Uint8Array(this.#data.length * 2)
        : this.#data;
      next.set(this.#data.subarray(this.#start, this.#end), 0);
      this.#data = next;
      this.#start = 0;
      this.#end = live;
    }
    const n = await this.#r.read(this.#data.subarray(this.#end));
    if (n === null) {
      this.#eof = true;
      return false;
    }
    this.#end += n;
    return true;
  }

  /** Reads until `pattern` is buffered; its offset from the start, or -1 at the end. */
  async fill(pattern: number[]): Promise<number> {
    let from = 0;
    for (;;) {
      const i = indexOf(this.#data.subarray(this.#start, this.#end), pattern, from);
      if (i >= 0) return i;
      from = Math.max(0, this.size - pattern.length + 1);
      if (!(await this.#more())) return -1;
    }
  }

  /** Reads until `n` bytes are buffered (or the end, for Infinity); false if it ended first. */
  async ensure(n: number): Promise<boolean> {
    while (this.size < n) if (!(await this.#more())) return n === Infinity;
    return true;
  }

  /** Takes `n` buffered bytes (a copy). */
  take(n: number): Uint8Array {
    const out = this.#data.slice(this.#start, this.#start + n);
    this.#start += n;
    return out;
  }
}

function indexOf(hay: Uint8Array, needle: number[], from: number): number {
  outer: for (let i = from; i <= hay.length - needle.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
