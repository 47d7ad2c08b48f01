/**
 * Line framing for the line-delimited JSON protocols: a `TextLineStream`-compatible splitter
 * (std's behaviour: `\n` or `\r\n`, empty lines kept, a final unterminated line flushed)
 * and the encoding of one JSON line. Pure.
 *
 * @module
 */

/** Splits a stream of text into lines without their terminators. */
export class TextLineStream extends TransformStream<string, string> {
  /** Pieces of the current unterminated line; only new chunks are searched for `\n`, so a
   * 10 MiB line arriving in 64 KiB chunks costs linear time, not a rescan per chunk. */
  #pending: string[] = [];

  constructor() {
    super({
      transform: (chunk, controller) => {
        let from = 0;
        let nl = chunk.indexOf("\n");
        while (nl !== -1) {
          this.#pending.push(chunk.slice(from, nl));
          const line = this.#pending.join("");
          this.#pending = [];
          controller.enqueue(line.endsWith("\r") ? line.slice(0, -1) : line);
          from = nl + 1;
          nl = chunk.indexOf("\n", from);
        }
        if (from < chunk.length) this.#pending.push(chunk.slice(from));
      },
      flush: (controller) => {
        const rest = this.#pending.join("");
        const buf = rest.endsWith("\r") ? rest.slice(0, -1) : rest;
        if (buf.length > 0) controller.enqueue(buf);
      },
    });
  }
}

/** Bytes → lines: decodes UTF-8 (streaming) and splits. */
export function lines(input: ReadableStream<Uint8Array>): ReadableStream<string> {
  return input.pipeThrough(new TextDecoderStream()).pipeThrough(new TextLineStream());
}

/** One compact JSON object followed by `\n`. */
export function encodeLine(value: unknown): string {
  return JSON.stringify(value) + "\n";
}
