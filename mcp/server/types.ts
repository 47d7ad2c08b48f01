/**
 * The protocol layer's options and handle (`serveMcp` in mod.ts).
 *
 * @module
 */

import type { ByteReader, ByteWriter } from "../../rpc/jsonl.ts";
import type { Session } from "../session/mod.ts";
import type { callTool } from "../tools/mod.ts";

/**
 * What answers tool calls: the session and the tool table. `isx mcp` loads it while the
 * protocol layer answers the handshake and `tools/list` (issue 11, start-up).
 */
export interface McpBackend {
  /** The session (its deps carry the Incus client, config, clock). */
  session: Session;
  /** Runs one `tools/call` (mcp/tools/mod.ts). */
  callTool: typeof callTool;
  /** Starts the task watcher; called while someone listens; returns its stop. */
  startWatcher?: () => () => void;
  /** Runs once when the session starts: after the first `initialize` answer or the first
   * stateless request (the orphan sweep). */
  onSessionStart?: () => void;
}

/** Options of `serveMcp`. */
export interface ServeOptions {
  /** stdin (the plain reader itself: no web stream to set up before the first answer). */
  input: ReadableStream<Uint8Array> | ByteReader;
  /** stdout: one JSON message per line, nothing else (a stream is closed at the end). */
  output: WritableStream<Uint8Array> | ByteWriter;
  /**
   * The backend, its promise, or its loader: called on the first request that needs it, or
   * once the client pauses after the handshake (requests that need it wait; a failure
   * fails them).
   */
  backend: McpBackend | Promise<McpBackend> | (() => Promise<McpBackend>);
  /** How long the client must pause after the handshake before the loader runs (20 ms). */
  idleLoadMs?: number;
  /** How long cancelled calls get to wind down at the end (default 10 s). */
  windDownMs?: number;
  /**
   * Told, as soon as a client names itself, which client it is and which era it speaks
   * (`initialize`, `server/discover`, or `stateless`: modern requests with no discover
   * first), once per distinct value on this connection. `isx mcp` writes it to mcp.log.
   */
  onClient?: (c: ClientSeen) => void;
}

/** A client as the server saw it. */
export interface ClientSeen {
  /** `initialize`, `server/discover` or `stateless`. */
  era: string;
  /** The protocol version it asked for (`none` when it named none). */
  protocol: string;
  /** `clientInfo.name` (`unknown` when absent). */
  name: string;
  /** `clientInfo.version` (`unknown` when absent). */
  version: string;
}

/** A running server. */
export interface McpServer {
  /** Resolves once input ended, calls wound down and the session released its instances. */
  readonly finished: Promise<void>;
  /** Ends as end of input does (SIGTERM). */
  shutdown(): Promise<void>;
}
