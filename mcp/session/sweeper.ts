/**
 * The orphan sweep's schedule (shared/spec/isx-mcp.md §4.4): once when the session starts,
 * then again {@link SWEEP_INTERVAL_MS} after each sweep ends, for as long as the server runs.
 * A server that lives for days would otherwise never reap an orphan whose grace ends while it
 * runs, nor take a dormancy CPU sample an hour after the last. The next sweep is scheduled
 * only when the last one ended, so two never overlap. A sweep's steps that set a `pending-op`
 * mark (a guarded delete, a dormancy stop) run through the sweeper's guard: `stop` waits for
 * those in flight, so none is cut between setting its mark and removing it, and refuses new
 * ones; the rest of a sweep (listing, probing) is abandoned, so a stalled incusd never holds
 * up a server that is ending. A quiet host pays one instance list per interval; the probes
 * only touch orphans past their grace.
 *
 * The first sweep waits for the session's first tool call to be answered, or
 * {@link FIRST_SWEEP_DELAY_MS} after the session started if no call comes sooner
 * ({@link Sweeper.startAfter}): it is background work (§4.4), and run beside the first call it
 * put its instance list (20 ms of incusd, the whole list parsed here) on that call's answer.
 *
 * The schedule is the runtime's own timer (`rpc/timer.ts`), not the global `setTimeout`, whose
 * first call loads Node's timers: the first sweep ends while the first tool call is being
 * answered, so arming the next one with `setTimeout` put ~10 ms on that answer. It is armed while
 * the server runs; {@link Sweeper.stop} disarms it, and a server that ends stops its sweeper
 * (cli/mcp.ts) before the process exits.
 *
 * @module
 */

import { after } from "../../rpc/timer.ts";
import type { MarkGuard } from "./sweep.ts";

/**
 * Ten minutes: grace periods are hours and dormancy samples are an hour apart, so a sweep is
 * at most a few minutes late for either, and an idle server costs one list per 10 minutes.
 */
export const SWEEP_INTERVAL_MS = 10 * 60_000;

/**
 * The longest the first sweep waits for the first tool call's answer: a client that connects
 * and waits for its user gets its sweep a second after the session starts.
 */
export const FIRST_SWEEP_DELAY_MS = 1_000;

/**
 * How long a server that is ending waits for a marked step in flight (a dormancy stop waits
 * up to 30 s for its instance).
 */
export const SWEEP_STOP_WAIT_MS = 40_000;

/** Runs a sweep now and then periodically, never two at once. */
export class Sweeper {
  #run: (guard: MarkGuard) => Promise<unknown>;
  #intervalMs: number;
  #disarm: (() => void) | undefined;
  #inFlight: Promise<void> | undefined;
  #marked = new Set<Promise<unknown>>();
  #stopped = false;
  #waiting = false;
  #count = 0;

  /** A schedule for `run` (which should not throw; a throw is swallowed). */
  constructor(run: (guard: MarkGuard) => Promise<unknown>, o: { intervalMs?: number } = {}) {
    this.#run = run;
    this.#intervalMs = o.intervalMs ?? SWEEP_INTERVAL_MS;
  }

  /** How many sweeps have started. */
  get count(): number {
    return this.#count;
  }

  /** Starts the first sweep now (once; later calls do nothing). */
  start(): void {
    if (this.#stopped || this.#count > 0 || this.#inFlight) return;
    this.#sweep();
  }

  /**
   * Starts the first sweep once `ready` settles (the first tool call answered) or `maxDelayMs`
   * after now, whichever comes first; a call after the first start does nothing.
   */
  startAfter(ready: Promise<unknown>, maxDelayMs: number = FIRST_SWEEP_DELAY_MS): void {
    if (this.#stopped || this.#count > 0 || this.#inFlight || this.#waiting) return;
    this.#waiting = true;
    const go = () => {
      disarm();
      this.#waiting = false;
      this.start();
    };
    const disarm = after(maxDelayMs, go);
    this.#disarm = disarm;
    ready.then(go, go);
  }

  #guard: MarkGuard = (step) => {
    if (this.#stopped) return Promise.reject(new Error("the session is ending"));
    const p = step();
    this.#marked.add(p);
    p.then(() => this.#marked.delete(p), () => this.#marked.delete(p));
    return p;
  };

  #sweep(): void {
    this.#disarm = undefined;
    if (this.#stopped) return;
    this.#count++;
    this.#inFlight = this.#run(this.#guard).then(() => {}, () => {}).finally(() => {
      this.#inFlight = undefined;
      if (this.#stopped) return;
      this.#disarm = after(this.#intervalMs, () => this.#sweep());
    });
  }

  /**
   * No further sweeps nor marked steps; resolves when the marked steps in flight (if any)
   * have ended, or after `waitMs`.
   */
  async stop(waitMs = Infinity): Promise<void> {
    this.#stopped = true;
    this.#disarm?.();
    this.#disarm = undefined;
    if (this.#marked.size === 0) return;
    const steps = Promise.allSettled([...this.#marked]).then(() => {});
    if (waitMs === Infinity) return await steps;
    let t: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([steps, new Promise<void>((r) => t = setTimeout(r, waitMs))]);
    clearTimeout(t);
  }
}
