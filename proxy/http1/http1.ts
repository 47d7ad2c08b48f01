/**
 * HTTP/1.1 message heads and body framing for the relay (RFC 9112), strict on purpose.
 *
 * The relay reads a guest's request head, rewrites it and writes it to the upstream
 * connection itself, so the framing the proxy reads must be the framing the upstream will
 * read: anything ambiguous is refused rather than guessed (both `Transfer-Encoding` and
 * `Content-Length`, a transfer coding other than `chunked`, differing lengths, bare LF,
 * obsolete line folding, a malformed name). Heads are handled as latin1 text (one character
 * per byte, what `Headers` accepts), so bytes survive a parse and re-serialisation
 * unchanged. Parsers return a string saying what is wrong instead of throwing: bad input
 * from the network is not a programmer error. Pure.
 *
 * @module
 */

import { Buffer } from "node:buffer";

/** A request head. */
export interface RequestHead {
  /** The method, as sent. */
  method: string;
  /** The request target as sent (origin-form `/path?query` for the fast path). */
  target: string;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: number;
  /** The header fields (names lower-cased, repeated ones combined). */
  headers: Headers;
}

/** A response head. */
export interface ResponseHead {
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: number;
  /** The status code. */
  status: number;
  /** The reason phrase (may be empty). */
  reason: string;
  /** The header fields (names lower-cased, repeated ones combined). */
  headers: Headers;
}

/** How a message body is delimited. */
export type Framing =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "close" };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^\s]+) HTTP\/1\.([01])$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;
const BAD_VALUE = /[\0\r\n]/;
const enc = new TextEncoder();

/** The head text of `buf[start, end)` up to and including its blank line, or `undefined`. */
export function headText(buf: Uint8Array, start: number, end: number): string | undefined {
  const text = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString(
    "latin1",
    start,
    end,
  );
  const at = text.indexOf("\r\n\r\n");
  return at < 0 ? undefined : text.slice(0, at + 4);
}

function parseFields(lines: string[]): Headers | string {
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) return `malformed header line`;
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return `malformed header name`;
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (BAD_VALUE.test(value)) return `malformed value of header "${name}"`;
    try {
      headers.append(name, value);
    } catch {
      return `malformed value of header "${name}"`;
    }
  }
  return headers;
}

function splitHead(text: string): string[] | string {
  if (!text.endsWith("\r\n\r\n")) return "head does not end with a blank line";
  const lines = text.slice(0, -4).split("\r\n");
  for (const l of lines) {
    if (l.includes("\n") || l.includes("\r")) return "bare CR or LF in the head";
    if (l.startsWith(" ") || l.startsWith("\t")) return "obsolete line folding";
  }
  return lines;
}

/** Parses a request head (text from {@link headText}); a string says what is wrong. */
export function parseRequestHead(text: string): RequestHead | string {
  const lines = splitHead(text);
  if (typeof lines === "string") return lines;
  const m = REQUEST_LINE.exec(lines[0]!);
  if (!m) return "malformed request line";
  const headers = parseFields(lines.slice(1));
  if (typeof headers === "string") return headers;
  return { method: m[1]!, target: m[2]!, minor: Number(m[3]), headers };
}

/** Parses a response head; a string says what is wrong. */
export function parseResponseHead(text: string): ResponseHead | string {
  const lines = splitHead(text);
  if (typeof lines === "string") return lines;
  const m = STATUS_LINE.exec(lines[0]!);
  if (!m) return "malformed status line";
  const headers = parseFields(lines.slice(1));
  if (typeof headers === "string") return headers;
  return { minor: Number(m[1]), status: Number(m[2]), reason: m[3] ?? "", headers };
}

/** The lower-cased tokens of the `Connection` header. */
export function connectionTokens(headers: Headers): Set<string> {
  return new Set(
    (headers.get("connection") ?? "").split(",").map((t) => t.trim().toLowerCase()).filter(
      Boolean,
    ),
  );
}

function contentLength(headers: Headers): number | string | undefined {
  const raw = headers.get("content-length");
  if (raw === null) return undefined;
  const parts = raw.split(",").map((p) => p.trim());
  if (!parts.every((p) => /^\d{1,15}$/.test(p) && p === parts[0])) {
    return "malformed content-length";
  }
  return Number(parts[0]);
}

/** How a request body is delimited (RFC 9112 §6.3, strict). */
export function requestFraming(headers: Headers): Framing | string {
  const te = headers.get("transfer-encoding");
  const length = contentLength(headers);
  if (te !== null) {
    if (length !== undefined) return "both transfer-encoding and content-length";
    if (te.trim().toLowerCase() !== "chunked") return "unsupported transfer-encoding";
    return { kind: "chunked" };
  }
  if (typeof length === "string") return length;
  return length ? { kind: "length", length } : { kind: "none" };
}

/** How a response body is delimited (RFC 9112 §6.3). */
export function responseFraming(
  method: string,
  status: number,
  headers: Headers,
): Framing | string {
  if (method === "HEAD" || status < 200 || status === 204 || status === 304) {
    return { kind: "none" };
  }
  const te = headers.get("transfer-encoding");
  if (te !== null) {
    const codings = te.split(",").map((c) => c.trim().toLowerCase());
    if (codings.at(-1) !== "chunked") return { kind: "close" };
    return codings.length === 1 ? { kind: "chunked" } : "unsupported transfer-encoding";
  }
  const length = contentLength(headers);
  if (typeof length === "string") return length;
  if (length === undefined) return { kind: "close" };
  return length ? { kind: "length", length } : { kind: "none" };
}

/** Serialises a request head (latin1, as parsed). */
export function requestHeadBytes(method: string, target: string, headers: Headers): Uint8Array {
  let text = `${method} ${target} HTTP/1.1\r\n`;
  for (const [k, v] of headers) text += `${k}: ${v}\r\n`;
  return Buffer.from(text + "\r\n", "latin1");
}

/** Serialises a response head (latin1, as parsed). */
export function responseHeadBytes(status: number, reason: string, headers: Headers): Uint8Array {
  let text = `HTTP/1.1 ${status} ${reason}\r\n`;
  for (const [k, v] of headers) text += `${k}: ${v}\r\n`;
  return Buffer.from(text + "\r\n", "latin1");
}

const REASONS: Readonly<Record<number, string>> = {
  400: "Bad Request",
  403: "Forbidden",
  421: "Misdirected Request",
  431: "Request Header Fields Too Large",
  502: "Bad Gateway",
};

/** A short plain-text answer from the proxy itself, closing the connection. */
export function answerBytes(status: number, message: string): Uint8Array {
  const body = enc.encode(`isx-proxy: ${message}\n`);
  const head = `HTTP/1.1 ${status} ${REASONS[status] ?? "Error"}\r\n` +
    `content-type: text/plain; charset=utf-8\r\nx-isx-proxy: 1\r\n` +
    `content-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  const out = new Uint8Array(head.length + body.length);
  out.set(enc.encode(head));
  out.set(body, head.length);
  return out;
}
