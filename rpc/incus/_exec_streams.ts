/**
 * The websocket side of one exec: output sockets as bounded `ReadableStream`s, stdin
 * writes in 64 KiB frames with the empty-text-frame EOF barrier, control messages, and the
 * teardown order (control closes last, after the operation ended). Private to rpc/incus.
 *
 * @module
 */

import type { WsClient } from "./websocket.ts";
import { IsbError } from "../errors.ts";
import type { Operation } from "./types.ts";

/** Most output chunks queued before the socket is paused (spec §11). */
export const OUTPUT_QUEUE = 256;
const FRAME = 64 * 1024;
const OPEN = 1;

/** Session wiring: pty or not, how to wait for the operation, the output streams. */
export interface StreamsOptions {
  interactive: boolean;
  wait: () => Promise<Operation>;
  /** Made by {@link outputStream} before the socket opened, so no frame is missed. */
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array>;
}

/** An exec session over its connected websockets (`control` first, then the fds). */
export class ExecStreams {
  readonly operation: string;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly exit: Promise<number>;
  #control: WsClient;
  #stdin: WsClient;
  #outs: WsClient[];
  #all: WsClient[];
  #interactive: boolean;
  #stdinClosed = false;

  constructor(operation: string, sockets: WsClient[], opts: StreamsOptions) {
    const [control, fd0, fd1, fd2] = sockets;
    if (!control || !fd0) throw new TypeError("ExecStreams needs control and fd 0");
    this.operation = operation;
    this.#control = control;
    this.#stdin = fd0;
    this.#interactive = opts.interactive;
    this.#outs = opts.interactive ? [fd0] : [fd1!, fd2!];
    this.#all = sockets;
    this.stdout = opts.stdout;
    this.stderr = opts.stderr;
    this.exit = this.#finish(opts.wait);
    this.exit.catch(() => {}); // a caller that never awaits exit must not crash the process
  }

  async #finish(wait: () => Promise<Operation>): Promise<number> {
    try {
      const op = await wait();
      await Promise.all(this.#outs.map(closed)); // incusd closes them once output is flushed
      const ret = (op.metadata as { return?: unknown } | null)?.return;
      return typeof ret === "number" ? ret : -1;
    } finally {
      this.close();
    }
  }

  /** Sends stdin bytes in frames of at most 64 KiB. */
  async write(data: Uint8Array): Promise<void> {
    if (this.#stdinClosed) throw new IsbError("invalid", "exec write: stdin already closed");
    for (let off = 0; off < data.length || off === 0; off += FRAME) {
      await send(this.#stdin, data.subarray(off, off + FRAME), true);
      if (data.length === 0) break;
    }
  }

  /** Ends stdin: the empty text frame is incusd's end-of-stdin barrier. */
  async closeStdin(): Promise<void> {
    if (this.#stdinClosed) return;
    this.#stdinClosed = true;
    if (this.#stdin.readyState !== OPEN) return;
    await send(this.#stdin, new Uint8Array(0), false);
    if (!this.#interactive) this.#stdin.close(1000);
  }

  /** Sends a signal through the control socket (ignored once the command ended). */
  async signal(signal: number): Promise<void> {
    await this.#controlMessage({ command: "signal", signal });
  }

  /** Resizes the pty (strings, as incusd expects). */
  async resize(width: number, height: number): Promise<void> {
    const args = { width: String(width), height: String(height) };
    await this.#controlMessage({ command: "window-resize", args });
  }

  /** Terminates every socket that is still open. */
  close(): void {
    for (const ws of this.#all) if (ws.readyState !== 3) ws.terminate();
  }

  async #controlMessage(msg: unknown): Promise<void> {
    if (this.#control.readyState !== OPEN) return;
    await send(this.#control, new TextEncoder().encode(JSON.stringify(msg)), false);
  }
}

function send(ws: WsClient, data: Uint8Array, binary: boolean): Promise<void> {
  if (ws.readyState !== OPEN) {
    return Promise.reject(new IsbError("websocket", "exec stdin: the command's socket is closed"));
  }
  return ws.send(data, binary);
}

function closed(ws: WsClient): Promise<void> {
  if (ws.readyState === 3) return Promise.resolve();
  return new Promise((resolve) => ws.on("close", () => resolve()));
}

/** A stream that is already over (stderr of a pty session). */
export function emptyStream(): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (ctl) => ctl.close() });
}

/**
 * One output socket as a byte stream; pauses the socket while 256 chunks are queued. A
 * reader that gives up (a `for await` whose body threw cancels the stream) leaves the
 * socket open: its later frames are dropped, and its close must not touch the controller,
 * whose `close()` throws once the stream is cancelled; thrown inside the socket's read
 * loop, that was an unhandled rejection.
 */
export function outputStream(ws: WsClient): ReadableStream<Uint8Array> {
  let done = false;
  return new ReadableStream<Uint8Array>({
    start(ctl) {
      const end = () => {
        if (!done) ctl.close();
        done = true;
      };
      ws.on("message", (bytes: Uint8Array, isBinary: boolean) => {
        if (done) return;
        if (!isBinary && bytes.length === 0) {
          // end-of-stream barrier: answer with our close, which a pty session waits for
          end();
          if (ws.readyState === OPEN) ws.close(1000);
          return;
        }
        ctl.enqueue(bytes);
        if ((ctl.desiredSize ?? 1) <= 0 && !ws.isPaused) ws.pause();
      });
      ws.on("close", end);
      ws.on("error", (e: Error) => {
        if (!done) ctl.error(new IsbError("websocket", `exec output: ${e.message}`, { cause: e }));
        done = true;
      });
    },
    pull() {
      if (ws.isPaused) ws.resume();
    },
    cancel() {
      done = true; // the stream is over for its reader: no close, no error, no more chunks
      if (ws.isPaused) ws.resume();
    },
  }, { highWaterMark: OUTPUT_QUEUE });
}
