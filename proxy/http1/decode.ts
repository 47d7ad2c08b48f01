/**
 * Response bodies an upstream compressed although the proxy asked for `Accept-Encoding:
 * identity`: which content codings can be undone, a decoding stream for them, and
 * {@link DecodingUsageReader}, which reads usage from a decoded copy while the compressed
 * bytes go to the guest untouched.
 *
 * Codings: `gzip` (and `x-gzip`), `deflate` (zlib-wrapped as RFC 9110 says, or raw deflate as
 * some servers send it: the first two bytes tell) and `br`, all by the runtime's
 * `DecompressionStream` (Deno 2.9.6 knows `"brotli"`). Codings listed in one header are undone
 * last first. Anything else (`zstd`, `compress`) is unknown: {@link contentCodings} says so
 * and the caller decides. Decoding errors (a corrupt or cut-off body) end the decoded stream
 * with an error; the usage reader keeps what it read until then. No I/O.
 *
 * @module
 */

import type { Usage, UsageReader } from "../activity/usage.ts";

/** A content coding the proxy can undo. */
export type Coding = "gzip" | "deflate" | "br";

/** Compressed bytes a {@link DecodingUsageReader} may have queued before it stops reading. */
export const DECODE_QUEUE_CAP = 16 * 1024 * 1024;

/**
 * The codings of a `Content-Encoding` value in the order applied; `[]` for none or
 * `identity`, `undefined` when one of them is not one the proxy can undo.
 */
export function contentCodings(header: string | null): Coding[] | undefined {
  const out: Coding[] = [];
  for (const raw of (header ?? "").split(",")) {
    const c = raw.trim().toLowerCase();
    if (c === "" || c === "identity") continue;
    if (c === "gzip" || c === "x-gzip") out.push("gzip");
    else if (c === "deflate" || c === "br") out.push(c);
    else return undefined;
  }
  return out;
}

/** `src` with `codings` undone (the last applied is undone first). */
export function decodeStream(
  src: ReadableStream<Uint8Array>,
  codings: readonly Coding[],
): ReadableStream<Uint8Array> {
  let s = src;
  for (const c of [...codings].reverse()) {
    s = c === "deflate"
      ? inflate(s)
      : s.pipeThrough(decompressor(c === "br" ? "brotli" as CompressionFormat : "gzip"));
  }
  return s;
}

/** The runtime's decompressor, typed for byte chunks. */
function decompressor(format: CompressionFormat): TransformStream<Uint8Array, Uint8Array> {
  return new DecompressionStream(format) as unknown as TransformStream<Uint8Array, Uint8Array>;
}

/** True when `b` starts with a zlib header (RFC 1950: method 8, check bits). */
function zlibHeader(b: Uint8Array): boolean {
  return b.length >= 2 && (b[0]! & 0x0f) === 8 && ((b[0]! << 8) | b[1]!) % 31 === 0;
}

/** HTTP `deflate`: zlib-wrapped, or raw deflate as some servers send it. */
function inflate(src: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  let out: ReadableStreamDefaultReader<Uint8Array> | undefined;
  const open = async () => {
    const head: number[] = [];
    const first: Uint8Array[] = [];
    while (head.length < 2) {
      const r = await reader.read();
      if (r.done) break;
      first.push(r.value);
      for (const b of r.value.subarray(0, 2 - head.length)) head.push(b);
    }
    const rest = new ReadableStream<Uint8Array>({
      start(ctl) {
        for (const c of first) ctl.enqueue(c);
      },
      async pull(ctl) {
        const r = await reader.read();
        if (r.done) ctl.close();
        else ctl.enqueue(r.value);
      },
      cancel: (why) => reader.cancel(why),
    });
    const format = zlibHeader(Uint8Array.from(head)) ? "deflate" : "deflate-raw";
    return rest.pipeThrough(decompressor(format)).getReader();
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      out ??= await open();
      const r = await out.read();
      if (r.done) ctl.close();
      else ctl.enqueue(r.value);
    },
    cancel: (why) => out ? out.cancel(why) : reader.cancel(why),
  });
}

/**
 * Reads usage from a compressed body: each chunk is copied (the relay reuses its buffer),
 * decoded on the side and fed to `reader`. Relayed bytes are not touched. If the decoder
 * falls more than {@link DECODE_QUEUE_CAP} behind, reading stops (usage so far is kept).
 */
export class DecodingUsageReader {
  readonly #reader: UsageReader;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #done: Promise<void>;
  #stopped = false;

  /** Starts decoding `codings` into `reader`. */
  constructor(reader: UsageReader, codings: readonly Coding[]) {
    this.#reader = reader;
    const pipe = new TransformStream<Uint8Array, Uint8Array>(
      {},
      new ByteLengthQueuingStrategy({ highWaterMark: 0 }),
    );
    this.#writer = pipe.writable.getWriter();
    const decoded = decodeStream(pipe.readable, codings);
    this.#done = (async () => {
      for await (const chunk of decoded) reader.push(chunk);
    })().catch(() => {
      // Corrupt or cut off: what was read stays counted.
      this.#stop();
    });
  }

  /** Takes the next compressed bytes (copied). */
  push(chunk: Uint8Array): void {
    if (this.#stopped || chunk.length === 0) return;
    if ((this.#writer.desiredSize ?? 0) < -DECODE_QUEUE_CAP) return this.#stop();
    this.#writer.write(chunk.slice()).catch(() => this.#stop());
  }

  #stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#writer.abort().catch(() => {});
  }

  /** Ends the body; resolves to the usage read once the decoder has caught up. */
  async finish(): Promise<Usage> {
    if (!this.#stopped) await this.#writer.close().catch(() => {});
    await this.#done;
    return this.#reader.finish();
  }
}
