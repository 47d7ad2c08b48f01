/**
 * What one guest may hold of the proxy: a cap on its open connections (the TLS port and the
 * forward proxy together), and timeouts that close what is left hanging: a request head that
 * does not arrive, a kept-alive connection with no next request, and a stream (an upstream
 * response, a tunnel) on which nothing moves either way. The stream timeout is generous: a
 * model call streams events with gaps, and a non-streaming one can be silent for minutes
 * before its answer. A refused connection is counted as `refused` for its instance in
 * `/activity`. Pure apart from timers.
 *
 * @module
 */

import type { Gate } from "../host/accept.ts";
import type { CallerLookup } from "./clients.ts";
import { normalizeAddress } from "./clients.ts";
import type { ActivityCounter } from "../activity/counter.ts";

/** The limits in force (`proxy.limits` in config.yaml). */
export interface ProxyLimits {
  /** Open connections per instance (TLS port and forward proxy together). */
  connectionsPerInstance: number;
  /** From accepting a connection (or the first byte of a request) to its whole head. */
  headerTimeoutMs: number;
  /** How long a kept-alive connection may wait for its next request. */
  keepAliveMs: number;
  /** How long a response or tunnel may go without a byte either way. */
  streamIdleMs: number;
}

/** The defaults (docs/proxy.md, "Limits"). */
export const DEFAULT_LIMITS: Readonly<ProxyLimits> = {
  connectionsPerInstance: 256,
  headerTimeoutMs: 30_000,
  keepAliveMs: 120_000,
  streamIdleMs: 900_000,
};

/** Counts open connections per key and refuses one over the cap. */
export class ConnectionCap {
  readonly #max: number;
  readonly #open = new Map<string, number>();

  /** Creates it with at most `max` open connections per key. */
  constructor(max: number) {
    this.#max = max;
  }

  /** Open connections of `key`. */
  open(key: string): number {
    return this.#open.get(key) ?? 0;
  }

  /** Takes a slot: its release (idempotent), or undefined when `key` is at the cap. */
  take(key: string): (() => void) | undefined {
    const n = this.open(key);
    if (n >= this.#max) return undefined;
    this.#open.set(key, n + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = this.open(key) - 1;
      if (left > 0) this.#open.set(key, left);
      else this.#open.delete(key);
    };
  }
}

/**
 * One timer for the successive deadlines of a relay connection: the keep-alive wait, a
 * request head, a body, a stream's idle time. {@link Deadline.set}, {@link Deadline.kick}
 * and {@link Deadline.clear} only note what is due; the timer is re-armed when it fires
 * before that (or a deadline comes earlier than it), so a kept-alive connection's requests
 * cost no timer each. A timer per request and phase (four) was about a tenth of the
 * proxy's CPU per request (bench/proxy_bench.ts). A tunnel's idle timeout is one `set` and a
 * `kick` per read.
 */
export class Deadline {
  #due = Infinity;
  #ms = 0;
  #onDue: (() => void) | undefined;
  /** When the pending timer fires (Infinity: none pending). */
  #at = Infinity;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** `onDue` runs once `ms` from now, unless set, kicked or cleared before. */
  set(ms: number, onDue: () => void): void {
    this.#ms = ms;
    this.#onDue = onDue;
    this.#due = performance.now() + ms;
    if (this.#due < this.#at) this.#arm();
  }

  /**
   * Something moved: the deadline set last is its `ms` from now again. A bound function, so
   * it is handed to a reader's `onData` as it is (a kick per read costs a clock read).
   */
  readonly kick = (): void => {
    if (this.#onDue) this.#due = performance.now() + this.#ms;
  };

  /** Nothing is due (a pending timer finds that when it fires, and ends). */
  clear(): void {
    this.#onDue = undefined;
    this.#due = Infinity;
  }

  /** Clears and ends the timer (the connection is done). */
  stop(): void {
    this.clear();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Infinity;
  }

  #arm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#at = this.#due;
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, this.#due - performance.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    this.#at = Infinity;
    const onDue = this.#onDue;
    if (!onDue) return;
    if (performance.now() < this.#due) return this.#arm();
    this.clear();
    onDue();
  }
}

/**
 * The gate of a guest-facing listener: a connection of a known instance takes one of that
 * instance's slots (a refusal counted as its `refused`); one from an address no instance
 * owns takes one of that address's (it only ever gets 403).
 */
export function connectionGate(
  o: { clients: CallerLookup; counter: ActivityCounter; cap: ConnectionCap },
): Gate {
  return async (conn) => {
    const remote = conn.remoteAddr as Deno.NetAddr;
    const caller = await o.clients.identify(remote).catch(() => undefined);
    const release = o.cap.take(
      caller ? `instance ${caller.name}` : `address ${normalizeAddress(remote.hostname)}`,
    );
    if (!release && caller) o.counter.refused(caller);
    return release;
  };
}
