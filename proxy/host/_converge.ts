/**
 * What the proxy needs from the world around it (the bridge's DNS block, the guard and
 * connection-limit nft tables, a first listing of the instance registry), each tried until it
 * holds. One failed attempt is not the end: `isx proxy restart` makes the stop's DNS PATCH
 * restart dnsmasq while the start's PATCH races the old one ("failed to create listening
 * socket … Address already in use", HTTP 500), a busy Incus answers late, nft can be busy. So
 * every need is retried with exponential backoff until it holds or the proxy stops, and
 * `/health` lists the ones that do not hold yet (`converging`): `isx proxy status` says
 * `running` only when that list is empty.
 *
 * The clock is injected (`sleep`), so tests drive the backoff without waiting.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";

/** One need that does not hold yet, as `/health` reports it. */
export interface PendingNeed {
  /** Its name (`dns`, `guard`, `conn_limit`, `registry`, …). */
  need: string;
  /** The last attempt's error (never a secret: Incus's and nft's messages). */
  error: string;
  /** Attempts made so far. */
  attempts: number;
}

/** Backoff bounds (milliseconds). */
export interface Backoff {
  /** The first wait after a failure. */
  firstMs: number;
  /** The longest wait between two attempts. */
  maxMs: number;
}

/** The default backoff: 250 ms, doubling, at most 10 s between attempts. */
export const DEFAULT_BACKOFF: Backoff = { firstMs: 250, maxMs: 10_000 };

/** The wait before attempt `n + 1` after `n` failures (pure): doubling, capped. */
export function backoffDelay(failures: number, b: Backoff = DEFAULT_BACKOFF): number {
  return Math.min(b.maxMs, b.firstMs * 2 ** Math.max(0, failures - 1));
}

/** Options of {@link Converger}. */
export interface ConvergerOptions {
  /** Backoff bounds (default {@link DEFAULT_BACKOFF}). */
  backoff?: Backoff;
  /** Waits `ms` or until `signal` aborts (default: a timer). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

function timerSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function message(e: unknown): string {
  return String((e as Error)?.message ?? e).slice(0, 500);
}

/** Tries each need until it holds, with backoff; reports the ones still pending. */
export class Converger {
  readonly #backoff: Backoff;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #abort = new AbortController();
  readonly #pending = new Map<string, PendingNeed>();
  readonly #loops = new Set<Promise<void>>();

  /** Creates it; nothing runs until {@link Converger.need}. */
  constructor(opts: ConvergerOptions = {}) {
    this.#backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.#sleep = opts.sleep ?? timerSleep;
  }

  /**
   * Makes one attempt now and, if it fails, keeps retrying in the background; resolves to
   * whether the first attempt held (pending until it does: callers that must not wait for a
   * slow Incus need not await it). `attempt` throws while the need does not hold.
   */
  async need(name: string, attempt: () => Promise<unknown>): Promise<boolean> {
    if (this.#pending.has(name)) throw new TypeError(`need "${name}" is already being tried`);
    // pending from the start: a need whose first attempt is still under way does not hold
    const p: PendingNeed = { need: name, error: "not tried yet", attempts: 0 };
    this.#pending.set(name, p);
    try {
      p.attempts++;
      await attempt();
      this.#pending.delete(name);
      return true;
    } catch (e) {
      p.error = message(e);
      if (this.#abort.signal.aborted) return false;
      log.warn("proxy: does not hold yet; retrying with backoff", { need: name, error: p.error });
      const loop = this.#retry(p, attempt);
      this.#loops.add(loop);
      void loop.finally(() => this.#loops.delete(loop));
      return false;
    }
  }

  async #retry(p: PendingNeed, attempt: () => Promise<unknown>): Promise<void> {
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      await this.#sleep(backoffDelay(p.attempts, this.#backoff), signal);
      if (signal.aborted) return;
      try {
        p.attempts++;
        await attempt();
        if (signal.aborted) return;
        this.#pending.delete(p.need);
        log.info("proxy: holds now", { need: p.need, attempts: p.attempts });
        return;
      } catch (e) {
        const error = message(e);
        if (error !== p.error) {
          log.warn("proxy: does not hold yet; retrying with backoff", { need: p.need, error });
        }
        p.error = error;
      }
    }
  }

  /** The needs that do not hold yet, by name. */
  pending(): PendingNeed[] {
    return [...this.#pending.values()].map((p) => ({ ...p })).sort((a, b) =>
      a.need < b.need ? -1 : a.need > b.need ? 1 : 0
    );
  }

  /** Whether `name` holds (was tried and did not fail since). */
  holds(name: string): boolean {
    return !this.#pending.has(name);
  }

  /** Stops retrying; waits for the attempts under way to end. */
  async close(): Promise<void> {
    this.#abort.abort();
    await Promise.all([...this.#loops]);
  }
}
