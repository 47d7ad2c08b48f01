/**
 * {@link ConnReader}: the relay's buffered reader over one connection. Heads are read into
 * its buffer and parsed there; bodies are read straight into the caller's buffer when
 * nothing is buffered (no copy). At most one read is outstanding at a time, and every
 * caller shares it: that one read doubles as the watch for a peer that goes away (or a
 * pooled upstream that closes) while the relay is busy elsewhere. A read error counts as
 * the end of the stream; the framing decides whether that end was premature.
 *
 * @module
 */

import { headText } from "./http1.ts";

/** The first buffer of a reader (it grows when a read fills it). */
export const FIRST_BUFFER = 4096;

/** What {@link ConnReader.head} found. */
export type HeadRead = { text: string } | { end: true } | { tooLarge: true };

/** A buffered reader over one connection. */
export class ConnReader {
  /** The connection read from. */
  readonly conn: Deno.Conn;
  #buf: Uint8Array;
  readonly #cap: number;
  #start = 0;
  #end = 0;
  #eof = false;
  #filling: Promise<boolean> | undefined;
  #direct = false;
  /** The last read filled all the room it had: the peer has more than the buffer holds. */
  #filled = false;
  /** Called after every read that got bytes (the relay's stall watchdog). */
  onData: (() => void) | undefined;

  /**
   * Creates it with a buffer that grows to `size` bytes (the largest head it can read): it
   * starts at {@link FIRST_BUFFER}, so a connection that sends little (a stalled head, a
   * slowloris) holds little, and is four times larger each time a read fills it, also when
   * what it read was consumed since: a streamed body read 4 KiB at a time would go to the
   * guest as sixteen times the writes (and TLS records) of 64 KiB reads.
   */
  constructor(conn: Deno.Conn, size = 64 * 1024) {
    this.conn = conn;
    this.#cap = size;
    this.#buf = new Uint8Array(Math.min(size, FIRST_BUFFER));
  }

  /** The buffer's current size (it grows up to the size given). */
  get capacity(): number {
    return this.#buf.length;
  }

  /** Bytes read but not consumed. */
  get buffered(): number {
    return this.#end - this.#start;
  }

  /** True once the peer ended the stream (or reading failed). */
  get eof(): boolean {
    return this.#eof && this.buffered === 0;
  }

  /** True when the buffer holds as much as it can. */
  get full(): boolean {
    return this.buffered === this.#cap;
  }

  /** True while a read is outstanding. */
  get reading(): boolean {
    return this.#filling !== undefined;
  }

  /** The buffered bytes (a view, valid until the next read or consume). */
  view(): Uint8Array {
    return this.#buf.subarray(this.#start, this.#end);
  }

  /** Drops `n` buffered bytes. */
  consume(n: number): void {
    this.#start += n;
    if (this.#start >= this.#end) this.#start = this.#end = 0;
  }

  /** Reads more into the buffer; false at the end of the stream or when it is full. */
  fill(): Promise<boolean> {
    if (this.#direct) throw new RangeError("ConnReader.fill: a direct read is outstanding");
    this.#filling ??= this.#fill().finally(() => (this.#filling = undefined));
    return this.#filling;
  }

  async #fill(): Promise<boolean> {
    if (this.#eof) return false;
    if (this.#end === this.#buf.length && this.#start > 0) {
      this.#buf.copyWithin(0, this.#start, this.#end);
      this.#end -= this.#start;
      this.#start = 0;
    }
    if ((this.#end === this.#buf.length || this.#filled) && this.#buf.length < this.#cap) {
      const grown = new Uint8Array(Math.min(this.#cap, this.#buf.length * 4));
      grown.set(this.#buf.subarray(0, this.#end));
      this.#buf = grown;
    }
    if (this.#end === this.#buf.length) return false;
    let n: number | null;
    const room = this.#buf.length - this.#end;
    try {
      n = await this.conn.read(this.#buf.subarray(this.#end));
    } catch {
      n = null;
    }
    if (n === null) {
      this.#eof = true;
      return false;
    }
    this.#filled = n === room;
    this.#end += n;
    this.onData?.();
    return true;
  }

  /** Reads into `dst`: buffered bytes first, else straight from the connection; null at the end. */
  async readInto(dst: Uint8Array): Promise<number | null> {
    if (this.buffered === 0 && this.#filling) await this.#filling;
    if (this.buffered > 0) {
      const n = Math.min(dst.length, this.buffered);
      dst.set(this.#buf.subarray(this.#start, this.#start + n));
      this.consume(n);
      return n;
    }
    if (this.#eof) return null;
    this.#direct = true;
    try {
      const n = await this.conn.read(dst);
      if (n === null) this.#eof = true;
      else this.onData?.();
      return n;
    } catch {
      this.#eof = true;
      return null;
    } finally {
      this.#direct = false;
    }
  }

  /**
   * The message head already buffered, consumed; `tooLarge` when the buffer is full without
   * one; undefined when more must be read ({@link ConnReader.head}).
   */
  bufferedHead(): { text: string } | { tooLarge: true } | undefined {
    if (this.buffered === 0) return undefined;
    const text = headText(this.#buf, this.#start, this.#end);
    if (text !== undefined) {
      this.consume(text.length);
      return { text };
    }
    return this.buffered >= this.#cap ? { tooLarge: true } : undefined;
  }

  /** Reads one message head (up to the buffer's size) and consumes it. */
  async head(): Promise<HeadRead> {
    for (;;) {
      const got = this.bufferedHead();
      if (got) return got;
      if (!(await this.fill())) {
        return this.buffered >= this.#cap ? { tooLarge: true } : { end: true };
      }
    }
  }
}
