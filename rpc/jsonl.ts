/**
 * Line framing for the line-delimited JSON protocols: a `TextLineStream`-compatible splitter
 * (std's behaviour: `\n` or `\r\n`, empty lines kept, a final unterminated line flushed),
 * the bytes → lines reader and the lines → bytes writer both protocols serve with, and the
 * encoding of one JSON line.
 *
 * The reader and the writer take a web stream or a plain reader/writer (the process's
 * stdin and stdout themselves): the servers are given the plain ones, because Deno's web streams are
 * loaded and set up on first use, which cost `isb rpc` and `isx mcp` ~5 ms of CPU before
 * their first answer (docs/decisions.md, "stdin and stdout without web streams"). So nothing
 * here touches a stream class until a stream is handed in. Pure.
 *
 * @module
 */

/**
 * The splitter behind {@link textLineStream} and {@link lines}: text chunks in, whole lines
 * out. Pieces of the current unterminated line are kept; only new chunks are searched for
 * `\n`, so a 10 MiB line arriving in 64 KiB chunks costs linear time, not a rescan per chunk.
 */
export class LineSplitter {
  #pending: string[] = [];

  /** The lines `chunk` completes, without their terminators. */
  push(chunk: string): string[] {
    const out: string[] = [];
    let from = 0;
    let nl = chunk.indexOf("\n");
    while (nl !== -1) {
      this.#pending.push(chunk.slice(from, nl));
      const line = this.#pending.join("");
      this.#pending = [];
      out.push(line.endsWith("\r") ? line.slice(0, -1) : line);
      from = nl + 1;
      nl = chunk.indexOf("\n", from);
    }
    if (from < chunk.length) this.#pending.push(chunk.slice(from));
    return out;
  }

  /** The final unterminated line, if it is not empty. */
  end(): string | undefined {
    const rest = this.#pending.join("");
    this.#pending = [];
    const line = rest.endsWith("\r") ? rest.slice(0, -1) : rest;
    return line.length > 0 ? line : undefined;
  }
}

/** A `TransformStream` that splits text into lines without their terminators. */
export function textLineStream(): TransformStream<string, string> {
  const split = new LineSplitter();
  return new TransformStream<string, string>({
    transform: (chunk, controller) => {
      for (const line of split.push(chunk)) controller.enqueue(line);
    },
    flush: (controller) => {
      const line = split.end();
      if (line !== undefined) controller.enqueue(line);
    },
  });
}

/** Something bytes are read from by chunks, as the process's stdin is. */
export interface ByteReader {
  /** Reads up to `p.length` bytes into `p`: how many, or null at the end. */
  read(p: Uint8Array): Promise<number | null>;
}

/** Something bytes are written to, as its stdout is (a write may take part of them). */
export interface ByteWriter {
  /** Writes a first part of `p`: how many bytes it took. */
  write(p: Uint8Array): Promise<number>;
}

/** Bytes → lines: decodes UTF-8 (streaming; a BOM dropped, bad bytes replaced) and splits. */
export function lines(input: ReadableStream<Uint8Array>): ReadableStream<string>;
/** The same from a plain reader, read 64 KiB at a time as the loop asks. */
export function lines(input: ReadableStream<Uint8Array> | ByteReader): AsyncIterable<string>;
export function lines(input: ReadableStream<Uint8Array> | ByteReader): AsyncIterable<string> {
  // told apart by shape: naming the stream classes would set them up (see the module doc)
  if ("getReader" in input) {
    return input.pipeThrough(new TextDecoderStream()).pipeThrough(textLineStream());
  }
  return readLines(input);
}

async function* readLines(input: ByteReader): AsyncGenerator<string> {
  const decoder = new TextDecoder(); // what TextDecoderStream does: BOM dropped, U+FFFD
  const split = new LineSplitter();
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    const n = await input.read(buf);
    if (n === null) break;
    yield* split.push(decoder.decode(buf.subarray(0, n), { stream: true }));
  }
  yield* split.push(decoder.decode());
  const last = split.end();
  if (last !== undefined) yield last;
}

/** One writer for a whole output: writes in call order, each whole, then closes. */
export interface LineOutput {
  /** Writes `bytes` after every earlier write; rejects when the output broke. */
  write(bytes: Uint8Array): Promise<void>;
  /** Waits for the writes, then closes a stream (a plain writer is left open: stdout). */
  close(): Promise<void>;
}

/** The {@link LineOutput} of a web stream or of a plain writer. */
export function lineOutput(output: WritableStream<Uint8Array> | ByteWriter): LineOutput {
  if ("getWriter" in output) {
    const writer = output.getWriter();
    return { write: (b) => writer.write(b), close: () => writer.close() };
  }
  let tail: Promise<void> = Promise.resolve();
  const writeAll = async (bytes: Uint8Array) => {
    for (let at = 0; at < bytes.length;) at += await output.write(bytes.subarray(at));
  };
  return {
    write(bytes) {
      const done = tail.then(() => writeAll(bytes));
      tail = done.catch(() => {});
      return done;
    },
    close: () => tail,
  };
}

/** One compact JSON object followed by `\n`. */
export function encodeLine(value: unknown): string {
  return JSON.stringify(value) + "\n";
}
