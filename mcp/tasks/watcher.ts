/**
 * Task-change events for `notifications/isx/task_changed` (spec §9): the watcher remembers
 * the last state it reported per task and emits exactly one event per transition. Paths
 * that learn a state for free (launch, `task_status`, cancel, forgetting an instance) call
 * {@link TaskWatcher.report}; a round probes, with one exec per instance, the tasks last
 * reported running or never reported. `unknown` is never sent and never changes what was
 * reported; a reading of an older run, or `running` after a terminal state of the same run,
 * is stale and dropped; `lost` comes from a probe or from an instance that is gone (404);
 * `released` is final for a task until {@link TaskWatcher.revive}. Every fifth round (the
 * first included) is a slow one: agent tasks that finished are probed too, with the presence
 * scan, so a person joining and leaving reads `attached` then `finished`. Time is injected.
 *
 * @module
 */

import { type Clock, hasCode, SYSTEM_CLOCK } from "../../rpc/base.ts";
import type { Decided } from "./state.ts";
import type { Presenced } from "./presence.ts";

/** The state words a notification carries. */
export type ChangeState = "running" | "finished" | "lost" | "attached" | "released";

/** One `notifications/isx/task_changed` payload. */
export interface TaskChange {
  /** The task id. */
  task_id: string;
  /** Its instance. */
  instance: string;
  /** The run the state belongs to. */
  run: number;
  /** The new state. */
  state: ChangeState;
  /** The exit code, once finished and known. */
  exit_code?: number;
}

/** What the watcher reads through (the engine's probe). */
export interface WatchSource {
  /** One exec per instance: each task's decided state. */
  probeStates(instance: string, taskIds: string[]): Promise<Map<string, Decided>>;
  /** The probe with the presence scan (slow rounds, for instances with agent tasks). */
  probePresence?(instance: string, taskIds: string[]): Promise<Map<string, Presenced>>;
}

/** Options of {@link TaskWatcher}. */
export interface WatcherOptions {
  /** Where probes go. */
  source: WatchSource;
  /** Receives each transition, once. */
  emit: (change: TaskChange) => void;
  /** Time (default: the system clock). */
  clock?: Clock;
  /** Pause between rounds, ms (default 2000, spec §11.2). */
  intervalMs?: number;
  /** Every how many rounds one is slow (default 5, spec §9). */
  slowEvery?: number;
}

interface Entry {
  instance: string;
  run: number;
  state?: ChangeState;
  exit_code?: number;
  tomb?: boolean;
  agent?: boolean;
}

const TERMINAL = new Set<ChangeState | undefined>(["finished", "lost", "released"]);

/** Turns probes and free readings into one event per task transition. */
export class TaskWatcher {
  #tasks = new Map<string, Entry>();
  #o: Required<Omit<WatcherOptions, "clock">> & { clock: Clock };
  #running = false;
  #rounds = 0;
  #loop: Promise<void> | undefined;
  #wake = () => {};

  /** A watcher; nothing is probed until {@link start} or {@link round}. */
  constructor(o: WatcherOptions) {
    this.#o = { intervalMs: 2000, slowEvery: 5, clock: SYSTEM_CLOCK, ...o };
  }

  /**
   * Starts watching a task (never reported yet: the next round reads it). An agent task
   * stays watched once finished (slow rounds: join and leave); `state` seeds what the
   * session already reported, so it is not sent again.
   */
  watch(
    instance: string,
    taskId: string,
    run = 1,
    o: { agent?: boolean; state?: ChangeState } = {},
  ): void {
    const e = this.#tasks.get(taskId);
    if (e) {
      if (o.agent) e.agent = true;
      return;
    }
    this.#tasks.set(taskId, {
      instance,
      run,
      ...(o.agent ? { agent: true } : {}),
      ...(o.state ? { state: o.state } : {}),
    });
  }

  /** Feeds a state learned elsewhere; emits when it is a transition. */
  report(
    instance: string,
    taskId: string,
    d: Decided | Presenced | { state: ChangeState; run: number; exit_code?: number },
  ): void {
    if (d.state === "unknown") return;
    const e = this.#tasks.get(taskId) ?? { instance, run: d.run };
    this.#tasks.set(taskId, e);
    if (e.tomb) return;
    if (d.run < e.run) return; // an older run: stale
    if (d.run === e.run && TERMINAL.has(e.state) && d.state === "running") return;
    if (d.run === e.run && e.state === d.state && e.exit_code === d.exit_code) return;
    e.instance = instance;
    e.run = d.run;
    e.state = d.state;
    if (d.exit_code === undefined) delete e.exit_code;
    else e.exit_code = d.exit_code;
    if (d.state === "released") e.tomb = true;
    const change: TaskChange = { task_id: taskId, instance, run: d.run, state: d.state };
    if (d.exit_code !== undefined && d.state === "finished") change.exit_code = d.exit_code;
    this.#o.emit(change);
  }

  /** The instance is gone (destroyed or 404): its running tasks are lost; all forgotten. */
  forget(instance: string): void {
    for (const [id, e] of [...this.#tasks]) {
      if (e.instance !== instance) continue;
      if (!e.tomb && (e.state === undefined || e.state === "running")) {
        this.report(instance, id, { state: "lost", run: e.run });
      }
      this.#tasks.delete(id);
    }
  }

  /** Another session took the instance: each of its tasks is `released`, then tombstoned. */
  release(instance: string): void {
    for (const [id, e] of this.#tasks) {
      if (e.instance === instance && !e.tomb) {
        this.report(instance, id, { state: "released", run: e.run });
      }
    }
  }

  /** The task was adopted back: reported again from its next reading, its run as a floor. */
  revive(instance: string, taskId: string): void {
    const e = this.#tasks.get(taskId);
    if (!e) return this.watch(instance, taskId);
    this.#tasks.set(taskId, { instance, run: e.run, ...(e.agent ? { agent: true } : {}) });
  }

  /** Stops watching a task without an event. */
  drop(taskId: string): void {
    this.#tasks.delete(taskId);
  }

  /**
   * The tasks a round would probe, per instance; `slow` adds finished and attached agent
   * tasks, and marks the instances to scan for presence.
   */
  pending(slow = false): Map<string, string[]> {
    const by = new Map<string, string[]>();
    for (const [id, e] of this.#tasks) {
      const open = e.state === undefined || e.state === "running";
      const joinable = slow && e.agent && (e.state === "finished" || e.state === "attached");
      if (e.tomb || !(open || joinable)) continue;
      by.set(e.instance, [...(by.get(e.instance) ?? []), id]);
    }
    return by;
  }

  /** One round: one probe per instance, in parallel; a gone instance is forgotten. */
  async round(): Promise<void> {
    const slow = this.#rounds++ % this.#o.slowEvery === 0 && !!this.#o.source.probePresence;
    await Promise.all([...this.pending(slow)].map(async ([instance, ids]) => {
      let states: Map<string, Decided | Presenced>;
      const scan = slow && ids.some((id) => this.#tasks.get(id)?.agent);
      try {
        states = scan
          ? await this.#o.source.probePresence!(instance, ids)
          : await this.#o.source.probeStates(instance, ids);
      } catch (e) {
        if (hasCode(e, "not_found")) this.forget(instance);
        return; // any other failure: skipped until the next round
      }
      for (const [id, d] of states) if (this.#tasks.has(id)) this.report(instance, id, d);
    }));
  }

  /** Runs rounds every interval until {@link stop}. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = (async () => {
      while (this.#running) {
        await this.round();
        if (this.#running) await this.#pause();
      }
    })();
  }

  // The system clock's pause is a timer cleared on stop (no timer outlives the watcher); an
  // injected clock's sleep is raced with the stop.
  #pause(): Promise<void> {
    const ms = this.#o.intervalMs;
    if (this.#o.clock !== SYSTEM_CLOCK) {
      return Promise.race([this.#o.clock.sleep(ms), new Promise<void>((r) => this.#wake = r)]);
    }
    return new Promise<void>((r) => {
      const t = setTimeout(r, ms);
      this.#wake = () => {
        clearTimeout(t);
        r();
      };
    });
  }

  /** Stops the rounds; resolves when the current one has ended. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#wake();
    await this.#loop;
  }
}
