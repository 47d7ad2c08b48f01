/**
 * The `chunked` transfer coding (RFC 9112 §7.1) as a byte-at-a-time state machine: it
 * finds where a chunked body ends and which bytes are payload, in any chunking of the
 * input, without copying. The relay uses it both ways: request bodies are forwarded as
 * they came (only their end matters), response bodies are decoded, scrubbed and chunked
 * again. Strict: CRLF only, hex sizes of at most 13 digits, bounded extension and trailer
 * lines. Payload bytes are skipped in bulk; only framing bytes are looked at. Pure.
 *
 * @module
 */

const CR = 13;
const LF = 10;
/** Longest chunk-size line (with extensions) and longest trailer section. */
const LINE_CAP = 4096;
const TRAILER_CAP = 64 * 1024;

enum S {
  Size,
  Ext,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  Trailer,
  TrailerLf,
  FinalLf,
  Done,
  Failed,
}

function hex(b: number): number {
  if (b >= 48 && b <= 57) return b - 48;
  if (b >= 97 && b <= 102) return b - 87;
  if (b >= 65 && b <= 70) return b - 55;
  return -1;
}

/** Decodes one chunked body; feed it bytes with {@link ChunkedDecoder.step}. */
export class ChunkedDecoder {
  #s: S = S.Size;
  #size = 0;
  #digits = 0;
  #line = 0;
  #trailer = 0;
  /** Start of the payload bytes the last step found (equal to `segEnd` when none). */
  segStart = 0;
  /** End of the payload bytes the last step found. */
  segEnd = 0;
  /** What was wrong, once a step returned -1. */
  error = "";

  /** True once the last chunk and the trailer section were read. */
  get done(): boolean {
    return this.#s === S.Done;
  }

  /**
   * Consumes `buf[pos, end)` up to the end of the next payload run (then `segStart`/
   * `segEnd` name it) or up to `end`; returns where it stopped, or -1 for malformed input.
   * Once {@link ChunkedDecoder.done}, bytes from the returned position on are not its own.
   */
  step(buf: Uint8Array, pos: number, end: number): number {
    this.segStart = this.segEnd = pos;
    while (pos < end) {
      switch (this.#s) {
        case S.Data: {
          const n = Math.min(this.#size, end - pos);
          this.segStart = pos;
          this.segEnd = pos + n;
          this.#size -= n;
          if (this.#size === 0) this.#s = S.DataCr;
          return pos + n;
        }
        case S.Done:
          return pos;
        case S.Failed:
          return -1;
      }
      const b = buf[pos++]!;
      switch (this.#s) {
        case S.Size: {
          const d = hex(b);
          if (d >= 0) {
            if (++this.#digits > 13) return this.#fail("chunk size too large");
            this.#size = this.#size * 16 + d;
          } else if (this.#digits > 0 && (b === 0x3b || b === 0x20 || b === 0x09)) {
            this.#s = S.Ext;
          } else if (this.#digits > 0 && b === CR) this.#s = S.SizeLf;
          else return this.#fail("malformed chunk size");
          break;
        }
        case S.Ext:
          if (b === CR) this.#s = S.SizeLf;
          else if (b === LF || ++this.#line > LINE_CAP) {
            return this.#fail("malformed chunk extension");
          }
          break;
        case S.SizeLf:
          if (b !== LF) return this.#fail("malformed chunk size line");
          this.#line = 0;
          this.#digits = 0;
          this.#s = this.#size === 0 ? S.TrailerStart : S.Data;
          break;
        case S.DataCr:
          if (b !== CR) return this.#fail("chunk longer than its size");
          this.#s = S.DataLf;
          break;
        case S.DataLf:
          if (b !== LF) return this.#fail("chunk longer than its size");
          this.#s = S.Size;
          break;
        case S.TrailerStart:
          if (b === CR) this.#s = S.FinalLf;
          else if (b === LF) return this.#fail("bare LF in the trailer section");
          else this.#s = S.Trailer;
          if (++this.#trailer > TRAILER_CAP) return this.#fail("trailer section too large");
          break;
        case S.Trailer:
          if (b === CR) this.#s = S.TrailerLf;
          else if (b === LF) return this.#fail("bare LF in the trailer section");
          if (++this.#trailer > TRAILER_CAP) return this.#fail("trailer section too large");
          break;
        case S.TrailerLf:
          if (b !== LF) return this.#fail("bare CR in the trailer section");
          this.#s = S.TrailerStart;
          break;
        case S.FinalLf:
          if (b !== LF) return this.#fail("bare CR after the last chunk");
          this.#s = S.Done;
          return pos;
      }
    }
    return pos;
  }

  #fail(why: string): number {
    this.#s = S.Failed;
    this.error = why;
    return -1;
  }
}

/** The framing bytes in front of a chunk of `n` payload bytes. */
export function chunkHead(n: number): string {
  return `${n.toString(16)}\r\n`;
}

/** The last chunk and an empty trailer section. */
export const LAST_CHUNK = "0\r\n\r\n";
