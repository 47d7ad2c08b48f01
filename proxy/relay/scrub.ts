/**
 * In-place scrubbing for the relay's hot path: real values are masked out of response
 * bodies in the relay's own buffer, without copying the bytes or changing their length.
 *
 * {@link Scrubber} overwrites every byte that belongs to any occurrence of any real value
 * with `*`, so `content-length` and chunk sizes stay right and overlapping values are all
 * masked. Across buffers it holds back only a tail that could still grow into a value (a
 * proper prefix of one); the caller presents that tail again, unchanged, in front of its
 * next bytes. The output is the same for every way the stream is cut (tested at every cut).
 *
 * Search runs on a latin1 view of the bytes ({@link latin1}: one character per byte, made
 * natively): V8's string search is many times faster than any byte loop written in JS on
 * this kind of machine. Pure.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Secret } from "../config/secret.ts";

const STAR = 0x2a;
const enc = new TextEncoder();

/** `buf[start, end)` as a string of one character per byte (U+0000–U+00FF). */
export function latin1(buf: Uint8Array, start: number, end: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString("latin1", start, end);
}

/** Masks real values in place; holds back only what could still become one. */
export class Scrubber {
  /** Each value's UTF-8 bytes as a latin1 string, longest first. */
  readonly #patterns: string[];
  readonly #first = new Uint8Array(256);
  readonly #maxLen: number;
  /** Leading bytes of the next buffer (the held tail) that an earlier match covers. */
  #pending = 0;
  /** Match bounds of the current scan (reused). */
  readonly #hits: number[] = [];

  /** A scrubber for these byte strings (duplicates and empty ones ignored). */
  constructor(values: readonly Uint8Array[]) {
    const set = new Set<string>();
    for (const v of values) if (v.length > 0) set.add(latin1(v, 0, v.length));
    this.#patterns = [...set].sort((a, b) => b.length - a.length);
    for (const p of this.#patterns) this.#first[p.charCodeAt(0)] = 1;
    this.#maxLen = this.#patterns[0]?.length ?? 0;
  }

  /** A scrubber for real values (their UTF-8 bytes). */
  static of(secrets: readonly Secret[]): Scrubber {
    return new Scrubber(secrets.map((s) => enc.encode(s.reveal())));
  }

  /** True when there is nothing to mask. */
  get empty(): boolean {
    return this.#patterns.length === 0;
  }

  /** Longest tail {@link Scrubber.scan} may hold back. */
  get maxHold(): number {
    return Math.max(0, this.#maxLen - 1);
  }

  /**
   * Masks `buf[0, end)` in place and returns how many leading bytes are final. The caller
   * emits those and presents `buf[result, end)` again, unchanged, before its next bytes.
   * With `final` nothing is held back. `text`, if given, is `latin1(buf, 0, end)` already made.
   */
  scan(buf: Uint8Array, end: number, final: boolean, text?: string): number {
    if (this.#patterns.length === 0 || end === 0) return end;
    text ??= latin1(buf, 0, end);
    const hold = final ? end : this.#holdAt(text);
    // Find first, mask after: a mask must not hide an overlapping occurrence of another value.
    const hits = this.#hits;
    hits.length = 0;
    for (const p of this.#patterns) {
      let at = text.indexOf(p);
      while (at >= 0 && at < hold) {
        hits.push(at, at + p.length);
        at = text.indexOf(p, at + 1);
      }
    }
    let pending = Math.max(0, this.#pending - hold);
    if (this.#pending > 0) buf.fill(STAR, 0, Math.min(this.#pending, hold));
    for (let i = 0; i < hits.length; i += 2) {
      const stop = hits[i + 1]!;
      buf.fill(STAR, hits[i]!, Math.min(stop, hold));
      if (stop > hold) pending = Math.max(pending, stop - hold);
    }
    this.#pending = pending;
    return hold;
  }

  /** First tail position whose bytes are a proper prefix of some pattern, else the end. */
  #holdAt(text: string): number {
    const end = text.length;
    for (let i = Math.max(0, end - this.#maxLen + 1); i < end; i++) {
      if (this.#first[text.charCodeAt(i)] === 0) continue;
      const tail = text.slice(i);
      for (const p of this.#patterns) {
        if (p.length > tail.length && p.startsWith(tail)) return i;
      }
    }
    return end;
  }

  /** What printing shows (patterns are secrets). */
  [Symbol.for("Deno.customInspect")](): string {
    return `Scrubber(${this.#patterns.length} patterns)`;
  }
}
