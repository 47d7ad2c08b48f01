/**
 * Callers of connections the proxy hands to itself over loopback: the forward proxy passes a
 * CONNECT to an intercepted host to the loopback twin of the TLS server, and the relay passes
 * what it does not speak (upgrades, HTTP/1.0) to its plain-HTTP handler. The receiving
 * side sees only `127.0.0.1:<client port>`, so the sender records the caller first.
 *
 * Keyed by the receiving listener's port and the client port together: Linux may give two
 * loopback connections to different listeners the same local port at once, and one map
 * shared by two listeners keyed by client port alone would let one hand-over's record
 * answer, or its end delete, the other's.
 *
 * @module
 */

import type { Caller } from "./clients.ts";

/** The callers of handed-over loopback connections, by listener port and client port. */
export class Handoff {
  readonly #byKey = new Map<string, Caller>();

  /** Records `caller` for the connection from `clientPort` to the listener on `serverPort`. */
  set(serverPort: number, clientPort: number, caller: Caller): void {
    this.#byKey.set(`${serverPort}:${clientPort}`, caller);
  }

  /** The caller recorded for that connection, if any. */
  get(serverPort: number, clientPort: number): Caller | undefined {
    return this.#byKey.get(`${serverPort}:${clientPort}`);
  }

  /** Forgets that connection's record. */
  delete(serverPort: number, clientPort: number): void {
    this.#byKey.delete(`${serverPort}:${clientPort}`);
  }

  /** How many hand-overs are recorded now. */
  get size(): number {
    return this.#byKey.size;
  }
}
