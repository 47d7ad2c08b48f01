/**
 * The accept loop every proxy listener shares: hand each connection to `handle`, keep
 * serving after a failed accept (a bad handshake must not stop the listener), and on
 * shutdown close the listener and every open connection, then wait for the handlers. A
 * guest-facing listener has a gate (proxy/callers/limits.ts): a connection it refuses is answered
 * by `refuse` (or just closed) and never reaches `handle`.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";

/** A listener being served. */
export interface Served {
  /** The bound address. */
  addr: Deno.NetAddr;
  /** Settles when the listener has closed and every handler ended. */
  finished: Promise<void>;
  /** Closes the listener and every open connection, then waits for `finished`. */
  shutdown(): Promise<void>;
}

/** Admits a connection: its release when done, or undefined to refuse it. */
export type Gate = (conn: Deno.Conn) => Promise<(() => void) | undefined>;

/** Serves `listener`, one `handle` call per connection; `what` names it in logs. */
export function serveConns(
  listener: Deno.Listener,
  handle: (conn: Deno.Conn, stopping: AbortSignal) => Promise<void>,
  what: string,
  opts: { gate?: Gate | undefined; refuse?: (conn: Deno.Conn) => Promise<void> } = {},
): Served {
  const conns = new Set<Deno.Conn>();
  const open = new Set<Promise<void>>();
  let closing = false;
  // Tells handlers to close what they hold besides the guest's connection (a tunnel's upstream).
  const stopping = new AbortController();
  const finished = (async () => {
    while (!closing) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch (e) {
        if (closing || e instanceof Deno.errors.BadResource) break;
        log.warn(`proxy: ${what}: accept failed`, { error: String((e as Error)?.message ?? e) });
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      conns.add(conn);
      const p = gated(conn, (c) => handle(c, stopping.signal), opts).finally(() => {
        open.delete(p);
        conns.delete(conn);
      });
      open.add(p);
    }
    await Promise.all(open);
  })();
  return {
    addr: listener.addr as Deno.NetAddr,
    finished,
    async shutdown() {
      closing = true;
      stopping.abort();
      closeQuietly(listener, ...conns);
      await finished;
    },
  };
}

async function gated(
  conn: Deno.Conn,
  handle: (conn: Deno.Conn) => Promise<void>,
  opts: { gate?: Gate | undefined; refuse?: (conn: Deno.Conn) => Promise<void> },
): Promise<void> {
  const release = opts.gate ? await opts.gate(conn) : () => {};
  if (release) {
    try {
      return await handle(conn);
    } finally {
      release();
    }
  }
  try {
    await opts.refuse?.(conn);
  } catch {
    /* the guest went away */
  } finally {
    closeQuietly(conn);
  }
}

/** Closes each of `closers` that is there, ignoring one already closed. */
export function closeQuietly(...closers: ({ close(): void } | undefined)[]): void {
  for (const c of closers) {
    try {
      c?.close();
    } catch { /* already closed */ }
  }
}
