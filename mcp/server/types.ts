/**
 * The protocol layer's options and handle (`serveMcp` in mod.ts).
 *
 * @module
 */

import type { Session } from "../session/mod.ts";

/** Options of `serveMcp`. */
export interface ServeOptions {
  /** stdin. */
  input: ReadableStream<Uint8Array>;
  /** stdout: one JSON message per line, nothing else. */
  output: WritableStream<Uint8Array>;
  /** The session (its deps carry the Incus client, config, clock). */
  session: Session;
  /** How long cancelled calls get to wind down at the end (default 10 s). */
  windDownMs?: number;
  /** Starts the task watcher; called while someone listens; returns its stop. */
  startWatcher?: () => () => void;
  /** Runs once when the session starts: after the first `initialize` answer or the first
   * stateless request (the orphan sweep). */
  onSessionStart?: () => void;
}

/** A running server. */
export interface McpServer {
  /** Resolves once input ended, calls wound down and the session released its instances. */
  readonly finished: Promise<void>;
  /** Ends as end of input does (SIGTERM). */
  shutdown(): Promise<void>;
}
