/**
 * Exec ids and their control calls: the pending queue → running controller handoff of
 * `isb rpc` (shared/spec/isb-rpc.md §2 "Exec pre-registration", §5.5).
 *
 * A `sandbox.exec` request is registered the moment its line is read, before it reaches
 * Incus. Control calls (`exec.write`, `exec.close_stdin`, `exec.signal`, `exec.resize`) that
 * name it are queued while it is pending and replayed, in order, when the command starts;
 * replay failures are dropped silently, as the spec says. Every call on one exec runs on a
 * per-exec chain, so a call that arrives during the replay stays behind the replayed ones.
 * Once the command has exited (or the request failed), the id is gone and control calls are
 * `not_found` "running exec <id> not found".
 *
 * @module
 */

import { IsbError } from "../../errors.ts";

/** What a running exec accepts from `exec.*`. */
export interface ExecControl {
  /** Writes bytes to piped stdin. */
  write(data: Uint8Array): Promise<void>;
  /** Ends piped stdin. */
  closeStdin(): Promise<void>;
  /** Sends a signal to the command. */
  signal(signal: number): Promise<void>;
  /** Resizes the terminal (a no-op without a tty). */
  resize(width: number, height: number): Promise<void>;
}

/** One control call, applied to the running exec. */
export type ControlOp = (control: ExecControl) => Promise<void>;

type State = "pending" | "running" | "done";

/** The `not_found` error of a control call for an id that has no pending or running exec. */
export function execNotFound(key: string): IsbError {
  return new IsbError("not_found", `running exec ${key} not found`);
}

/** One registered exec: pending until {@link ExecSlot.start}, done after {@link ExecSlot.finish}. */
export class ExecSlot {
  /** The exec id (the request id rendered as a string). */
  readonly key: string;
  #state: State = "pending";
  #queue: ControlOp[] = [];
  #control: ExecControl | undefined;
  #chain: Promise<void> = Promise.resolve();
  #onDone: (slot: ExecSlot) => void;

  /** A pending slot; `onDone` runs once when it finishes (the registry forgets it). */
  constructor(key: string, onDone: (slot: ExecSlot) => void) {
    this.key = key;
    this.#onDone = onDone;
  }

  /** True while the exec may still receive control calls. */
  get live(): boolean {
    return this.#state !== "done";
  }

  /** The command runs: replays the queued calls in order (their failures dropped). */
  start(control: ExecControl): void {
    if (this.#state !== "pending") return;
    this.#state = "running";
    this.#control = control;
    const queued = this.#queue;
    this.#queue = [];
    for (const op of queued) this.#chain = this.#chain.then(() => op(control)).catch(() => {});
  }

  /** Applies (running) or queues (pending) a control call; `not_found` once done. */
  apply(op: ControlOp): Promise<void> {
    if (this.#state === "pending") {
      this.#queue.push(op);
      return Promise.resolve();
    }
    const control = this.#control;
    if (this.#state === "done" || control === undefined) {
      return Promise.reject(execNotFound(this.key));
    }
    const run = this.#chain.then(() => {
      if (this.#state === "done") throw execNotFound(this.key);
      return op(control);
    });
    this.#chain = run.catch(() => {});
    return run;
  }

  /** The command exited or the request failed: later calls are `not_found`. */
  finish(): void {
    if (this.#state === "done") return;
    this.#state = "done";
    this.#queue = [];
    this.#control = undefined;
    this.#onDone(this);
  }
}

/** The execs of one server, keyed by request id. */
export class ExecRegistry {
  #slots = new Map<string, ExecSlot>();

  /** Registers a pending exec under `key` (a newer request with the same id replaces it). */
  register(key: string): ExecSlot {
    const slot = new ExecSlot(key, (s) => {
      if (this.#slots.get(s.key) === s) this.#slots.delete(s.key);
    });
    this.#slots.set(key, slot);
    return slot;
  }

  /** The slot registered under `key`, or a new one (for a handler called without the server). */
  claim(key: string): ExecSlot {
    return this.#slots.get(key) ?? this.register(key);
  }

  /** Applies or queues a control call for the exec `key`; `not_found` if there is none. */
  control(key: string, op: ControlOp): Promise<void> {
    const slot = this.#slots.get(key);
    if (!slot) return Promise.reject(execNotFound(key));
    return slot.apply(op);
  }

  /** How many execs are pending or running. */
  get size(): number {
    return this.#slots.size;
  }
}

/** The exec id of a request id: a string as itself, anything else as its JSON text. */
export function execKey(id: unknown): string {
  return typeof id === "string" ? id : JSON.stringify(id) ?? "null";
}
