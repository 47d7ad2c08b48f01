/**
 * Capped output for foreground commands: the last N bytes of a stream with its total size,
 * and complete lines as they arrive (for progress). Pure; a chunk can be cut anywhere,
 * including inside a UTF-8 sequence or a line.
 *
 * @module
 */

/** Output limits of spec §2 (bytes). */
export const DEFAULT_OUTPUT_BYTES = 32 * 1024;
/** The largest tail a caller may ask for. */
export const MAX_OUTPUT_BYTES = 256 * 1024;
/** The smallest tail a caller may ask for. */
export const MIN_OUTPUT_BYTES = 256;
/** The most stdin a foreground command takes. */
export const MAX_STDIN_BYTES = 1024 * 1024;
/** Status tails (spec §3.4): 64 KiB of output; an agent's stderr tail is 2000 bytes. */
export const STATUS_TAIL_BYTES = 64 * 1024;
/** The longest line handed to a progress callback (characters). */
export const MAX_LINE_CHARS = 1000;

/** Keeps the last `cap` bytes written and counts them all. */
export class TailBuffer {
  #cap: number;
  #chunks: Uint8Array[] = [];
  #held = 0;
  /** Every byte written so far. */
  total = 0;

  /** A buffer keeping at most `cap` bytes. */
  constructor(cap: number) {
    this.#cap = cap;
  }

  /** Appends a chunk, dropping what falls out of the window. */
  push(chunk: Uint8Array): void {
    this.total += chunk.length;
    if (chunk.length >= this.#cap) {
      this.#chunks = [chunk.slice(chunk.length - this.#cap)];
      this.#held = this.#cap;
      return;
    }
    this.#chunks.push(chunk);
    this.#held += chunk.length;
    while (this.#held - this.#chunks[0]!.length >= this.#cap) {
      this.#held -= this.#chunks.shift()!.length;
    }
  }

  /** True when bytes were dropped. */
  get truncated(): boolean {
    return this.total > this.#cap;
  }

  /** The kept tail as text; a sequence cut at the start is skipped, not garbled. */
  text(): string {
    const all = new Uint8Array(this.#held);
    let off = 0;
    for (const c of this.#chunks) {
      all.set(c, off);
      off += c.length;
    }
    let start = Math.max(0, this.#held - this.#cap);
    if (start > 0 || this.truncated) {
      for (let i = 0; i < 3 && (all[start]! & 0xc0) === 0x80; i++) start++;
    }
    return new TextDecoder().decode(all.subarray(start));
  }
}

/** Splits decoded chunks into lines; calls `onLine` with each complete one (capped). */
export class LineSplitter {
  #dec = new TextDecoder();
  #partial = "";
  #onLine: (line: string) => void;

  /** A splitter calling `onLine` per complete line. */
  constructor(onLine: (line: string) => void) {
    this.#onLine = onLine;
  }

  /** Feeds a chunk. */
  push(chunk: Uint8Array): void {
    const parts = (this.#partial + this.#dec.decode(chunk, { stream: true })).split("\n");
    this.#partial = parts.pop() ?? "";
    if (this.#partial.length > MAX_LINE_CHARS * 4) {
      this.#partial = this.#partial.slice(-MAX_LINE_CHARS);
    }
    for (const p of parts) this.#onLine(p.replace(/\r$/, "").slice(0, MAX_LINE_CHARS));
  }

  /** Flushes a last line without a newline. */
  end(): void {
    const rest = this.#partial + this.#dec.decode();
    this.#partial = "";
    if (rest) this.#onLine(rest.slice(0, MAX_LINE_CHARS));
  }
}
