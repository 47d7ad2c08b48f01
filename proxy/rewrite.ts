/**
 * What the proxy changes in the bytes it relays: credentials go into request heads on the
 * way upstream, and real values are scrubbed out of everything coming back.
 *
 * Request side: hop-by-hop and isx-internal headers are dropped, then the policy's
 * {@link HeaderOp}s run (set, delete, swap a Basic password, replace a placeholder inside a
 * value). Response side: {@link StreamRewriter} replaces every real value by a mask of the
 * same length, so `content-length` stays right; it holds back only as many bytes as a match
 * could still need, so a value split across chunks is caught and the output does not depend
 * on where the chunks were cut (tested at every cut). Pure: no I/O.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Secret } from "./secret.ts";

/** One byte-level replacement. */
export interface Replacement {
  from: Uint8Array;
  to: Uint8Array;
}

const EMPTY = new Uint8Array(0);
const enc = new TextEncoder();

/**
 * One character per byte (windows-1252 as WHATWG decodes "latin1": a bijection), so string
 * search finds byte offsets; V8's string search is several times faster than any byte
 * search reachable from JS.
 */
const BYTES = new TextDecoder("latin1");

/** Streaming find-and-replace over bytes; output is the same for every chunking. */
export class StreamRewriter {
  readonly #pairs: { from: string; len: number; to: Uint8Array }[];
  readonly #maxLen: number;
  #carry: Uint8Array = EMPTY;

  constructor(pairs: readonly Replacement[]) {
    const seen = new Set<string>();
    this.#pairs = [];
    for (const p of pairs) {
      if (p.from.length === 0) throw new RangeError("StreamRewriter: empty pattern");
      const from = BYTES.decode(p.from);
      if (seen.has(from)) continue;
      seen.add(from);
      this.#pairs.push({ from, len: p.from.length, to: p.to });
    }
    // Longest first: at equal starts the longest pattern wins.
    this.#pairs.sort((a, b) => b.len - a.len);
    this.#maxLen = this.#pairs[0]?.len ?? 0;
  }

  /** True when there is nothing to replace (callers may skip the rewriter). */
  get empty(): boolean {
    return this.#pairs.length === 0;
  }

  /** Takes the next chunk; returns what can be emitted now. */
  push(chunk: Uint8Array): Uint8Array {
    if (this.#pairs.length === 0) return chunk;
    const buf = this.#carry.length === 0 ? chunk : concat([this.#carry, chunk]);
    return this.#run(buf, false);
  }

  /** Ends the stream; returns the held-back rest. */
  flush(): Uint8Array {
    const rest = this.#carry;
    this.#carry = EMPTY;
    return rest.length === 0 ? EMPTY : this.#run(rest, true);
  }

  #run(b: Uint8Array, final: boolean): Uint8Array {
    const text = BYTES.decode(b);
    const out: Uint8Array[] = [];
    let pos = 0;
    this.#carry = EMPTY;
    for (;;) {
      let best = -1;
      let pair: { from: string; len: number; to: Uint8Array } | undefined;
      for (const p of this.#pairs) {
        const i = text.indexOf(p.from, pos);
        if (i >= 0 && (best < 0 || i < best)) {
          best = i;
          pair = p;
        }
      }
      const partial = final ? -1 : this.#partialAt(text, pos);
      if (partial >= 0 && (best < 0 || partial <= best)) {
        out.push(b.subarray(pos, partial));
        this.#carry = b.slice(partial);
        break;
      }
      if (best < 0 || !pair) {
        out.push(b.subarray(pos));
        break;
      }
      out.push(b.subarray(pos, best), pair.to);
      pos = best + pair.len;
    }
    if (out.length === 1) return final ? out[0]!.slice() : out[0]!;
    return concat(out);
  }

  /** First tail position whose remaining bytes are a proper prefix of some pattern. */
  #partialAt(text: string, pos: number): number {
    for (let i = Math.max(pos, text.length - this.#maxLen + 1); i < text.length; i++) {
      const rest = text.length - i;
      for (const p of this.#pairs) {
        if (p.len > rest && p.from.startsWith(text.slice(i))) return i;
      }
    }
    return -1;
  }

  /** What printing shows (patterns are secrets). */
  [Symbol.for("Deno.customInspect")](): string {
    return `StreamRewriter(${this.#pairs.length} patterns)`;
  }
}

/** A TransformStream around a {@link StreamRewriter}. */
export function rewriteStream(
  pairs: readonly Replacement[],
): TransformStream<Uint8Array, Uint8Array> {
  const rw = new StreamRewriter(pairs);
  return new TransformStream({
    transform(chunk, ctl) {
      const out = rw.push(chunk);
      if (out.length) ctl.enqueue(out);
    },
    flush(ctl) {
      const out = rw.flush();
      if (out.length) ctl.enqueue(out);
    },
  });
}

/** The scrub pairs for real values: each replaced by `*` of the same byte length. */
export function scrubPairs(secrets: readonly Secret[]): Replacement[] {
  return secrets.filter((s) => s.length > 0).map((s) => {
    const from = enc.encode(s.reveal());
    return { from, to: new Uint8Array(from.length).fill(0x2a) };
  });
}

/** Scrubs real values out of one string (header values, error texts). */
export function scrubText(text: string, secrets: readonly Secret[]): string {
  let out = text;
  for (const s of secrets) {
    const v = s.reveal();
    if (v.length > 0 && out.includes(v)) out = out.split(v).join("*".repeat(enc.encode(v).length));
  }
  return out;
}

/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1). */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The header a guest presents its per-start instance secret in; never forwarded. */
export const INSTANCE_SECRET_HEADER = "x-isx-instance-secret";

/** One change the policy makes to a request head. */
export type HeaderOp =
  | { op: "set"; name: string; value: Secret; prefix?: string }
  | { op: "delete"; name: string }
  /** `Authorization: Basic user:value`; with `keepGuestUser`, the guest's user name wins. */
  | { op: "basic"; value: Secret; user: string; keepGuestUser?: boolean }
  /** Replace `placeholder` inside any header value by the real value. */
  | { op: "substitute"; placeholder: string; value: Secret };

/** A copy of `src` without hop-by-hop headers, those `Connection` names, and isx headers. */
export function forwardableHeaders(src: Headers): Headers {
  const named = new Set(
    (src.get("connection") ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean),
  );
  const out = new Headers();
  for (const [k, v] of src) {
    if (HOP_BY_HOP.has(k) || named.has(k) || k === INSTANCE_SECRET_HEADER) continue;
    out.append(k, v);
  }
  return out;
}

function basicUser(current: string | null, fallback: string): string {
  const m = /^basic\s+(\S+)\s*$/i.exec(current ?? "");
  if (!m) return fallback;
  try {
    const decoded = atob(m[1]!);
    const colon = decoded.indexOf(":");
    const user = colon < 0 ? decoded : decoded.slice(0, colon);
    return user || fallback;
  } catch {
    return fallback;
  }
}

function utf8Base64(s: string): string {
  return Buffer.from(s, "utf8").toString("base64");
}

/** Applies the policy's operations to a request head, in order. */
export function applyHeaderOps(headers: Headers, ops: readonly HeaderOp[]): void {
  for (const op of ops) {
    switch (op.op) {
      case "set":
        headers.set(op.name, (op.prefix ?? "") + op.value.reveal());
        break;
      case "delete":
        headers.delete(op.name);
        break;
      case "basic": {
        const user = op.keepGuestUser ? basicUser(headers.get("authorization"), op.user) : op.user;
        headers.set("authorization", `Basic ${utf8Base64(`${user}:${op.value.reveal()}`)}`);
        break;
      }
      case "substitute":
        for (const [k, v] of [...headers]) {
          if (v.includes(op.placeholder)) {
            headers.set(k, v.split(op.placeholder).join(op.value.reveal()));
          }
        }
        break;
    }
  }
}

/** Response headers for the guest: hop-by-hop dropped, real values scrubbed. */
export function responseHeaders(src: Headers, secrets: readonly Secret[]): Headers {
  const out = forwardableHeaders(src);
  for (const [k, v] of [...out]) {
    const clean = scrubText(v, secrets);
    if (clean !== v) out.set(k, clean);
  }
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
