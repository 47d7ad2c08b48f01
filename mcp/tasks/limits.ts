/**
 * `max_concurrent_tasks` (spec §3.8): busy tasks counted per host user, with a reservation
 * taken under a lock so two starts racing in one server cannot both take the last slot.
 * Busy = this session's running tasks (the caller's registry) + reservations still
 * launching + tasks reported busy (running or unknown) by each instance held elsewhere or
 * orphaned, one bounded probe per such instance: never more than one in flight, an instance
 * that fails or takes over 5 s is not asked again for 10 minutes and counts 0 meanwhile,
 * each task id counted once. A refusal names the counts and the instances elsewhere.
 *
 * @module
 */

import { type Clock, SYSTEM_CLOCK } from "../../rpc/base.ts";
import type { TaskListing } from "./parse.ts";

/** Cool-down for an instance that failed or answered slowly (ms). */
export const PROBE_COOLDOWN_MS = 10 * 60_000;
/** An answer slower than this puts the instance in cool-down (ms). */
export const PROBE_SLOW_MS = 5_000;
/** A probe still unanswered after this long counts 0 and cools the instance down (ms). */
export const PROBE_BOUND_MS = 10_000;

/** Counts the busy tasks of instances this session does not hold. */
export class BusyElsewhere {
  #list: (instance: string) => Promise<TaskListing[]>;
  #clock: Clock;
  #inFlight = new Map<string, Promise<TaskListing[] | undefined>>();
  #coolUntil = new Map<string, number>();

  /**
   * `list` reads one instance's tasks; pass the engine's listing with `deadlineMs` of
   * {@link PROBE_BOUND_MS} so the guest command is killed too. An answer later than that
   * counts 0 here whatever `list` does.
   */
  constructor(list: (instance: string) => Promise<TaskListing[]>, clock: Clock = SYSTEM_CLOCK) {
    this.#list = list;
    this.#clock = clock;
  }

  #probe(instance: string): Promise<TaskListing[] | undefined> {
    const cur = this.#inFlight.get(instance);
    if (cur) return cur;
    if ((this.#coolUntil.get(instance) ?? -Infinity) > this.#clock.now()) {
      return Promise.resolve(undefined);
    }
    const t0 = this.#clock.now();
    // the system clock's bound is a timer cleared once answered (none outlives a count)
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = () => Promise.reject(new Error("no answer in time"));
    const bound = this.#clock === SYSTEM_CLOCK
      ? new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("no answer in time")), PROBE_BOUND_MS);
      })
      : this.#clock.sleep(PROBE_BOUND_MS).then(late);
    const p = Promise.race([this.#list(instance), bound]).then(
      (tasks) => {
        if (this.#clock.now() - t0 > PROBE_SLOW_MS) this.#cool(instance);
        return tasks;
      },
      () => {
        this.#cool(instance);
        return undefined;
      },
    ).finally(() => {
      clearTimeout(timer);
      this.#inFlight.delete(instance);
    });
    this.#inFlight.set(instance, p);
    return p;
  }

  #cool(instance: string): void {
    this.#coolUntil.set(instance, this.#clock.now() + PROBE_COOLDOWN_MS);
  }

  /** Busy tasks per instance (running or unknown), each id once, probes in parallel. */
  async count(instances: string[]): Promise<Map<string, number>> {
    const lists = await Promise.all(instances.map((i) => this.#probe(i)));
    const seen = new Set<string>();
    const out = new Map<string, number>();
    instances.forEach((instance, k) => {
      let n = 0;
      for (const t of lists[k] ?? []) {
        if ((t.state === "running" || t.state === "unknown") && !seen.has(t.task_id)) {
          seen.add(t.task_id);
          n++;
        }
      }
      out.set(instance, n);
    });
    return out;
  }
}

/** The busy counts a reservation weighs. */
export interface BusyCounts {
  /** This session's running tasks (its registry; launching ones are the reservations). */
  mine: number;
  /** Busy tasks per instance held elsewhere or orphaned. */
  elsewhere: Map<string, number>;
}

/** A reservation's outcome. */
export type Reserved =
  | { ok: true; reservation: Reservation }
  | { ok: false; busy: number; max: number; message: string };

/** A slot taken for a launch; counts as busy until released. */
export interface Reservation {
  /** Frees the slot: after the launch failed, or once the registry counts the task. */
  release(): void;
}

/** Reservations of `max_concurrent_tasks` slots, taken one at a time. */
export class TaskSlots {
  #lock: Promise<void> = Promise.resolve();
  #launching = 0;

  /** How many reservations are launching now. */
  get launching(): number {
    return this.#launching;
  }

  /** Under the lock: counts busy tasks and takes a slot, or says why not. */
  reserve(max: number, counts: () => Promise<BusyCounts>): Promise<Reserved> {
    const run = this.#lock.then(async (): Promise<Reserved> => {
      const c = await counts();
      let other = 0;
      for (const n of c.elsewhere.values()) other += n;
      const busy = c.mine + this.#launching + other;
      if (busy >= max) {
        return { ok: false, busy, max, message: refusal(busy, max, c, this.#launching) };
      }
      this.#launching++;
      let freed = false;
      return {
        ok: true,
        reservation: {
          release: () => {
            if (!freed) this.#launching--;
            freed = true;
          },
        },
      };
    });
    this.#lock = run.then(() => {}, () => {});
    return run;
  }
}

/** The refusal text: the counts, and which instances elsewhere hold busy tasks. */
export function refusal(busy: number, max: number, c: BusyCounts, launching: number): string {
  const where = [...c.elsewhere].filter(([, n]) => n > 0).map(([i, n]) => `${i} (${n})`);
  return `${busy} of max_concurrent_tasks ${max} are busy: ${c.mine} running in this session` +
    (launching ? `, ${launching} launching` : "") +
    `, ${busy - c.mine - launching} elsewhere${where.length ? `: ${where.join(", ")}` : ""}; ` +
    "wait for a task to finish (wait_any) or cancel one (cancel_task)";
}
