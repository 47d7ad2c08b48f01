/**
 * The stdin side of a running exec ({@link StdinPump}): ordered, windowed sends toward the
 * Incus session, `exec.write`/`exec.close_stdin` for a piped stdin, and EOF as a terminal
 * sends it on a tty.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import type { ExecSession } from "../../incus/mod.ts";

/** Most stdin chunks waiting to be sent before `exec.write` waits. */
export const STDIN_WINDOW = 16;

/** End of input typed at a terminal (^D): how a tty's stdin ends. */
const EOT = new Uint8Array([4]);

/**
 * Stdin toward the session, in order: at most {@link STDIN_WINDOW} chunks wait; `undefined`
 * is EOF. A piped stdin accepts `write`/`close` from control calls; otherwise those are
 * `invalid` "stdin is not piped". After EOF, writes are `websocket` "stdin is closed".
 *
 * On a tty, EOF is ^D written to the terminal rather than Incus's end-of-stdin barrier:
 * Incus 6.0 answers the barrier on a pty by tearing the terminal down, which races with the
 * command's output (a command that has not printed yet loses its output). ^D ends input the
 * way a terminal does; ^D twice when the pending line is not empty (one only flushes it).
 */
export class StdinPump {
  #session: ExecSession;
  #piped: boolean;
  #tty: boolean;
  #lineOpen = false;
  #closed = false;
  #queued = 0;
  #tail: Promise<void> = Promise.resolve();
  #failure: unknown;
  #space: (() => void)[] = [];

  constructor(session: ExecSession, piped: boolean, tty: boolean) {
    this.#session = session;
    this.#piped = piped;
    this.#tty = tty;
  }

  /** `exec.write`. */
  write(data: Uint8Array): Promise<void> {
    if (!this.#piped) return Promise.reject(new IsbError("invalid", "stdin is not piped"));
    if (this.#closed) return Promise.reject(new IsbError("websocket", "stdin is closed"));
    return this.send(data);
  }

  /** `exec.close_stdin` (a second close is a no-op). */
  close(): Promise<void> {
    if (!this.#piped) return Promise.reject(new IsbError("invalid", "stdin is not piped"));
    if (this.#closed) return Promise.resolve();
    return this.send(undefined);
  }

  /** Queues a chunk (or EOF); resolves once it is queued, waiting while the queue is full. */
  async send(data: Uint8Array | undefined): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure;
    if (data === undefined) this.#closed = true;
    if (this.#tty && data !== undefined && data.length > 0) {
      this.#lineOpen = data[data.length - 1] !== 10 && data[data.length - 1] !== 13;
    }
    if (this.#tty && data === undefined) {
      data = this.#lineOpen ? new Uint8Array([4, 4]) : EOT;
      this.#lineOpen = false;
      await this.#enqueue(data);
      return await this.#tail;
    }
    await this.#enqueue(data);
    if (data === undefined) await this.#tail; // EOF is acknowledged once everything is sent
  }

  async #enqueue(data: Uint8Array | undefined): Promise<void> {
    while (this.#queued >= STDIN_WINDOW) await new Promise<void>((r) => this.#space.push(r));
    this.#queued++;
    this.#tail = this.#tail.then(async () => {
      try {
        if (this.#failure === undefined) {
          await (data === undefined ? this.#session.closeStdin() : this.#session.write(data));
        }
      } catch (e) {
        this.#failure = e instanceof IsbError ? e : new IsbError("websocket", `stdin: ${e}`);
      } finally {
        this.#queued--;
        this.#space.shift()?.();
      }
    });
  }
}
