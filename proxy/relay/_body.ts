/**
 * The relay's message pumps. Response heads are read with interim (1xx) ones passed on.
 * Request bodies go upstream as they came (only their end is found, so the next request on
 * the connection starts in the right place). Response bodies are read into one reusable
 * buffer, masked there in place by the {@link Scrubber}, read for usage, counted, and written
 * to the guest from that same buffer: no copy for `content-length` bodies, one copy for
 * chunked ones (the upstream's framing is dropped and the payload chunked again); the
 * response head goes out in the same write as the first bytes. Every write is awaited before
 * the next read, so a slow guest slows the upstream read and nothing piles up in memory.
 *
 * @module
 */

import { ChunkedDecoder, chunkHead, LAST_CHUNK } from "../http1/chunked.ts";
import type { ConnReader } from "../http1/conn_reader.ts";
import type { TrafficCall } from "../activity/counter.ts";
import {
  type Framing,
  parseResponseHead,
  type ResponseHead,
  responseHeadBytes,
} from "../http1/http1.ts";
import { responseHeaders } from "./rewrite.ts";
import type { Secret } from "../config/secret.ts";
import { latin1, type Scrubber } from "./scrub.ts";
import type { UsageReader } from "../activity/usage.ts";

/** Payload bytes a {@link BodyWriter} holds at most. */
export const BODY_BUFFER = 64 * 1024;
const RESERVE = 16;
const TAIL = 8;
const enc = new TextEncoder();
const LAST = enc.encode(LAST_CHUNK);

/** What {@link readFinalHead} says when the upstream closed without a byte of answer. */
export const UNANSWERED = "closed before answering";

/**
 * Reads the final response head; interim 1xx heads are scrubbed, counted and passed on
 * through `interim` on the way. A string says what went wrong.
 */
export async function readFinalHead(
  up: ConnReader,
  o: {
    secrets: readonly Secret[];
    traffic: TrafficCall;
    interim: (b: Uint8Array) => Promise<void>;
  },
): Promise<ResponseHead | string> {
  for (;;) {
    const got = await up.head();
    if ("end" in got) return UNANSWERED;
    if ("tooLarge" in got) return "response head too large";
    const res = parseResponseHead(got.text);
    if (typeof res === "string" || res.status >= 200) return res;
    if (res.status === 101) return "switched protocols unasked";
    const head = responseHeadBytes(res.status, res.reason, responseHeaders(res.headers, o.secrets));
    await o.interim(head);
    o.traffic.received(head.length);
  }
}

/** Writes all of `data`. */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}

/** A copy of a request body as it went upstream (framing included), up to `limit` bytes. */
export interface KeptBody {
  /** The most bytes kept; a longer body is not kept (`over`). */
  limit: number;
  chunks: Uint8Array[];
  size: number;
  over: boolean;
}

/**
 * Forwards a request body as it came, `head` in the same write as its first bytes; true
 * once all of it went upstream, false if the guest ended early or the framing was bad.
 */
export async function pumpRequest(
  from: ConnReader,
  to: Deno.Conn,
  o: { framing: Framing; head: Uint8Array; sent: (n: number) => void; keep?: KeptBody },
): Promise<boolean> {
  let head: Uint8Array | undefined = o.head;
  const keep = o.keep;
  const send = async (bytes: Uint8Array) => {
    if (keep && !keep.over && bytes.length) {
      keep.size += bytes.length;
      if (keep.size > keep.limit) {
        keep.over = true;
        keep.chunks = [];
      } else keep.chunks.push(bytes.slice());
    }
    if (head) {
      const both = new Uint8Array(head.length + bytes.length);
      both.set(head);
      both.set(bytes, head.length);
      head = undefined;
      await writeAll(to, both);
    } else await writeAll(to, bytes);
    o.sent(bytes.length);
  };
  const f = o.framing;
  if (f.kind === "none") {
    await send(new Uint8Array(0));
    return true;
  }
  // Nothing of the body here yet: the head goes now (the guest may await `100 Continue`).
  if (from.buffered === 0) await send(new Uint8Array(0));
  const chunked = f.kind === "chunked" ? new ChunkedDecoder() : undefined;
  let left = f.kind === "length" ? f.length : Infinity;
  while (chunked ? !chunked.done : left > 0) {
    if (from.buffered === 0 && !(await from.fill())) return false;
    const v = from.view();
    let n = Math.min(v.length, left);
    if (chunked) {
      n = 0;
      while (n < v.length && !chunked.done) {
        n = chunked.step(v, n, v.length);
        if (n < 0) return false;
      }
    }
    await send(v.subarray(0, n));
    from.consume(n);
    left -= n;
  }
  return true;
}

/**
 * Reads a request body ahead, before anything of the request goes upstream, so a body
 * whose framing is bad (or that the guest stops sending) never lets the head, with its
 * injected credential, leave: a `content-length` body or a chunked one is read until it is
 * complete (chunked framing checked all the way) or the reader's buffer (64 KiB) is full;
 * a larger body is then streamed, its framing checked as it goes. With `expect:
 * 100-continue` the head must go first (the guest waits for the interim answer), so only
 * the forwarding checks it. "bad" is malformed chunked framing, "short" a guest that ended
 * before its body did.
 */
export async function prefetchBody(
  from: ConnReader,
  framing: Framing,
  o: { expectContinue: boolean },
): Promise<"ok" | "bad" | "short"> {
  if (o.expectContinue || (framing.kind !== "length" && framing.kind !== "chunked")) return "ok";
  const chunked = framing.kind === "chunked" ? new ChunkedDecoder() : undefined;
  // Offsets into the view: nothing is consumed here, so they stay valid across fills.
  let checked = 0;
  for (;;) {
    const v = from.view();
    if (chunked) {
      while (checked < v.length && !chunked.done) {
        checked = chunked.step(v, checked, v.length);
        if (checked < 0) return "bad";
      }
      if (chunked.done) return "ok";
    } else if (framing.kind === "length" && v.length >= framing.length) return "ok";
    if (from.full) return "ok";
    if (!(await from.fill())) return from.full ? "ok" : "short";
  }
}

/** Where one response body goes. */
export interface ResponseSink {
  /** The guest connection. */
  guest: Deno.Conn;
  /** Masks real values. */
  scrub: Scrubber;
  /** Reads usage from a model call's body (or from a decoded copy of it). */
  reader: Pick<UsageReader, "push"> | undefined;
  /** Counts bytes to the guest. */
  traffic: TrafficCall;
  /** Chunk the body (the upstream's was chunked or ran to the connection's close). */
  chunked: boolean;
}

/** Where {@link pumpResponse} puts a body's payload. */
export interface PayloadSink {
  /** Free room to read payload into. */
  space(): Uint8Array;
  /** Takes `n` bytes read into {@link PayloadSink.space}. */
  commit(n: number): void;
  /** Takes payload bytes from elsewhere (copied). */
  append(bytes: Uint8Array): Promise<void>;
  /** Passes on what is final; `final` ends the body. */
  flush(final: boolean): Promise<void>;
}

/** The scrubbing, counting writer of response bodies; one per guest connection. */
export class BodyWriter implements PayloadSink {
  #buf = new Uint8Array(0);
  #payload = new Uint8Array(0);
  #side = new Uint8Array(0);
  #len = 0;
  #sink: ResponseSink | undefined;
  #head: Uint8Array | undefined;

  /** Starts a response: `head` goes out with the first body bytes. */
  begin(sink: ResponseSink, head: Uint8Array): void {
    const cap = Math.max(BODY_BUFFER, 4 * sink.scrub.maxHold);
    if (this.#payload.length !== cap) {
      this.#buf = new Uint8Array(RESERVE + cap + TAIL);
      this.#payload = this.#buf.subarray(RESERVE, RESERVE + cap);
    }
    if (this.#side.length < sink.scrub.maxHold + TAIL) {
      this.#side = new Uint8Array(sink.scrub.maxHold + TAIL);
    }
    this.#sink = sink;
    this.#head = head;
    this.#len = 0;
  }

  /** Free room for payload bytes (read into it, then {@link BodyWriter.commit}). */
  space(): Uint8Array {
    return this.#payload.subarray(this.#len);
  }

  /** Takes `n` bytes just read into {@link BodyWriter.space}. */
  commit(n: number): void {
    this.#len += n;
  }

  /** Copies payload bytes in, flushing when full. */
  async append(bytes: Uint8Array): Promise<void> {
    for (let off = 0; off < bytes.length;) {
      if (this.#len === this.#payload.length) await this.flush(false);
      const n = Math.min(this.#payload.length - this.#len, bytes.length - off);
      this.#payload.set(bytes.subarray(off, off + n), this.#len);
      this.#len += n;
      off += n;
    }
  }

  /** Scrubs, reads and writes what is final; `final` ends the body. */
  async flush(final: boolean): Promise<void> {
    const s = this.#sink;
    if (!s) throw new RangeError("BodyWriter.flush: no response begun");
    const p = this.#payload;
    // One latin1 view serves both the scrubber's and the usage reader's searches.
    const text = s.scrub.empty && !s.reader ? "" : latin1(p, 0, this.#len);
    const hold = s.scrub.scan(p, this.#len, final, text);
    s.reader?.push(p.subarray(0, hold), text.slice(0, hold));
    const carry = this.#len - hold;
    let out: Uint8Array;
    if (s.chunked) {
      if (carry > 0) this.#side.set(p.subarray(hold, this.#len));
      let from = RESERVE;
      let stop = RESERVE;
      if (hold > 0) {
        const h = chunkHead(hold);
        from = RESERVE - h.length;
        for (let i = 0; i < h.length; i++) this.#buf[from + i] = h.charCodeAt(i);
        this.#buf[RESERVE + hold] = 13;
        this.#buf[RESERVE + hold + 1] = 10;
        stop = RESERVE + hold + 2;
      }
      if (final) {
        this.#buf.set(LAST, stop);
        stop += LAST.length;
      }
      out = this.#buf.subarray(from, stop);
    } else out = p.subarray(0, hold);
    const head = this.#head;
    this.#head = undefined;
    if (head) {
      const both = new Uint8Array(head.length + out.length);
      both.set(head);
      both.set(out, head.length);
      out = both;
    }
    if (out.length > 0) {
      await writeAll(s.guest, out);
      s.traffic.received(out.length);
    }
    if (carry > 0) {
      if (s.chunked) p.set(this.#side.subarray(0, carry));
      else p.copyWithin(0, hold, this.#len);
    }
    this.#len = carry;
  }
}

/** Relays one response body from `up` through `w`; true when all of it arrived and went out. */
export async function pumpResponse(
  up: ConnReader,
  framing: Framing,
  w: PayloadSink,
): Promise<boolean> {
  if (framing.kind === "none") {
    await w.flush(true);
    return true;
  }
  if (framing.kind === "chunked") {
    const d = new ChunkedDecoder();
    while (!d.done) {
      if (up.buffered === 0 && !(await up.fill())) return false;
      const v = up.view();
      let pos = 0;
      while (pos < v.length && !d.done) {
        pos = d.step(v, pos, v.length);
        if (pos < 0) return false;
        if (d.segEnd > d.segStart) await w.append(v.subarray(d.segStart, d.segEnd));
      }
      up.consume(pos);
      if (!d.done) await w.flush(false);
    }
    await w.flush(true);
    return true;
  }
  let left = framing.kind === "length" ? framing.length : Infinity;
  while (left > 0) {
    const space = w.space();
    const n = await up.readInto(space.length > left ? space.subarray(0, left) : space);
    if (n === null) {
      if (framing.kind === "length") return false;
      break;
    }
    w.commit(n);
    left -= n;
    if (left > 0) await w.flush(false);
  }
  await w.flush(true);
  return true;
}
