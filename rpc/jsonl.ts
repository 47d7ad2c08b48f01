/**
 * Line framing for the line-delimited JSON protocols: a `TextLineStream`-compatible splitter
 * (std's behaviour: `\n` or `\r\n`, empty lines kept, a final unterminated line flushed)
 * and the encoding of one JSON line. Pure.
 *
 * @module
 */

/** Splits a stream of text into lines without their terminators. */
export class TextLineStream extends TransformStream<string, string> {
  #buf = "";

  constructor() {
    super({
      transform: (chunk, controller) => {
        let buf = this.#buf + chunk;
        let nl = buf.indexOf("\n");
        while (nl !== -1) {
          const end = nl > 0 && buf.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
          controller.enqueue(buf.slice(0, end));
          buf = buf.slice(nl + 1);
          nl = buf.indexOf("\n");
        }
        this.#buf = buf;
      },
      flush: (controller) => {
        const buf = this.#buf.endsWith("\r") ? this.#buf.slice(0, -1) : this.#buf;
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
