/**
 * The relay's upstream connections: opened on demand (TCP, then TLS with the real service's
 * name and ALPN `http/1.1`), kept alive after a clean exchange, and reused by the next
 * request with the same key. The relay keys them by calling instance and origin, so one
 * instance's requests never share a connection with another's: whatever a guest does to
 * the framing of its own requests can only ever reach its own responses. An idle
 * connection that says anything (data or close) is dropped at once, one idle for
 * {@link IDLE_MS} too; at most {@link MAX_IDLE} wait per key.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";
import { closeQuietly } from "../host/accept.ts";
import { ConnReader } from "../http1/conn_reader.ts";
import type { UpstreamOrigin } from "./upstream.ts";
import { type Guard, guardedAddresses } from "../egress/guard.ts";

/** How long an unused upstream connection is kept. */
export const IDLE_MS = 60_000;
/** Idle connections kept per key. */
export const MAX_IDLE = 8;

/** One upstream connection lent to an exchange. */
export interface Lease {
  /** Pool key (instance and origin). */
  readonly key: string;
  /** The connection. */
  readonly conn: Deno.Conn;
  /** Its reader. */
  readonly reader: ConnReader;
  /** False when it served an earlier exchange. */
  readonly fresh: boolean;
}

interface Idle {
  lease: Lease;
  timer: ReturnType<typeof setTimeout>;
  idle: boolean;
}

/** Keep-alive upstream connections, per key. */
export class UpstreamPool {
  readonly #idle = new Map<string, Idle[]>();
  readonly #open = new Set<Deno.Conn>();
  readonly #caCerts: string[] | undefined;
  readonly #guard: Guard | undefined;
  #closed = false;

  /**
   * Creates it; `caCerts` are trusted besides the system's (tests and benchmarks). With
   * `guard`, a host name is resolved by it and connected to only at an address it allows
   * (proxy/egress/guard.ts); test overrides are exempt.
   */
  constructor(opts: { caCerts?: string[]; guard?: Guard } = {}) {
    this.#caCerts = opts.caCerts;
    this.#guard = opts.guard;
  }

  /** An idle connection for `key` (unless `fresh` is asked), else a new one to `origin`. */
  async acquire(
    key: string,
    origin: UpstreamOrigin,
    opts: { fresh?: boolean } = {},
  ): Promise<Lease> {
    const list = this.#idle.get(key);
    while (list?.length && !opts.fresh) {
      const it = list.pop()!;
      it.idle = false;
      clearTimeout(it.timer);
      if (!it.lease.reader.eof) return { ...it.lease, fresh: false };
      this.discard(it.lease);
    }
    if (list) this.#idle.delete(key);
    if (this.#closed) throw new IsbError("io", "connect upstream: the proxy is stopping");
    const address = this.#guard && !origin.overridden
      ? (await guardedAddresses(origin.hostname, this.#guard))[0]!.text
      : origin.hostname;
    if (this.#closed) throw new IsbError("io", "connect upstream: the proxy is stopping");
    const tcp = await Deno.connect({ hostname: address, port: origin.port });
    this.#open.add(tcp);
    let conn: Deno.Conn = tcp;
    try {
      tcp.setNoDelay(true);
      if (origin.secure) {
        const tls = await Deno.startTls(tcp, {
          hostname: origin.hostname,
          alpnProtocols: ["http/1.1"],
          ...(this.#caCerts ? { caCerts: this.#caCerts } : {}),
        });
        this.#open.delete(tcp);
        this.#open.add(tls);
        conn = tls;
        await tls.handshake();
      }
    } catch (e) {
      this.#open.delete(conn);
      closeQuietly(conn);
      throw e;
    }
    if (this.#closed) {
      this.discard({ key, conn, reader: new ConnReader(conn), fresh: true });
      throw new IsbError("io", "connect upstream: the proxy is stopping");
    }
    return { key, conn, reader: new ConnReader(conn), fresh: true };
  }

  /** Takes a connection back after a clean exchange; it waits for the next one. */
  release(lease: Lease): void {
    const list = this.#idle.get(lease.key) ?? [];
    if (this.#closed || lease.reader.eof || lease.reader.buffered > 0 || list.length >= MAX_IDLE) {
      return this.discard(lease);
    }
    const it: Idle = {
      lease,
      idle: true,
      timer: setTimeout(() => drop(), IDLE_MS),
    };
    const drop = () => {
      if (!it.idle) return;
      it.idle = false;
      clearTimeout(it.timer);
      const l = this.#idle.get(lease.key);
      const i = l?.indexOf(it) ?? -1;
      if (i >= 0) l!.splice(i, 1);
      if (l?.length === 0) this.#idle.delete(lease.key);
      this.discard(lease);
    };
    list.push(it);
    this.#idle.set(lease.key, list);
    // Anything an idle upstream says (more data, or its close) ends it; the same read
    // carries the next response if a request comes first.
    void lease.reader.fill().then(drop, drop);
  }

  /** Closes a connection that must not be reused. */
  discard(lease: Lease): void {
    this.#open.delete(lease.conn);
    closeQuietly(lease.conn);
  }

  /** Closes every connection, idle or lent, and refuses new ones. */
  close(): void {
    this.#closed = true;
    for (const list of this.#idle.values()) {
      for (const it of list) {
        it.idle = false;
        clearTimeout(it.timer);
      }
    }
    this.#idle.clear();
    for (const c of this.#open) closeQuietly(c);
    this.#open.clear();
  }
}
