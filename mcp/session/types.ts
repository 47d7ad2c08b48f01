/**
 * The session's data: what it holds and knows, and what it tells listeners.
 *
 * @module
 */

/** A task state word (§3.3). */
export type TaskStateWord = "running" | "finished" | "attached" | "lost" | "unknown";

/** A task change as notifications carry it (§9). */
export interface TaskChange {
  /** The task. */
  task_id: string;
  /** Its instance. */
  instance: string;
  /** The run. */
  run: number;
  /** The new state; `released` when another session adopted the instance. */
  state: "running" | "finished" | "attached" | "lost" | "released";
  /** Once finished. */
  exit_code?: number;
}

/** A held instance. */
export interface Held {
  /** Its name. */
  name: string;
  /** Its template. */
  template: string;
  /** The stated purpose. */
  purpose?: string;
  /** Creation time (ISO). */
  created: string;
  /** `creating` until the branch is usable. */
  state: "creating" | "ready";
  /** Handed to the user with keep_instance. */
  kept: boolean;
  /** Taken over, but its task records not read yet (the adoption answered `busy`). */
  tasksUnread?: boolean;
}

/** A task this session knows. */
export interface TaskEntry {
  /** The id. */
  id: string;
  /** Its instance. */
  instance: string;
  /** command or agent. */
  kind: "command" | "agent";
  /** The current run. */
  run: number;
  /** As last seen. */
  state: TaskStateWord;
  /** Its idempotency key. */
  key?: string;
  /** The command (for replay comparison). */
  command?: string;
  /** An agent task's agent, once known. */
  agent?: string;
}

/** A foreground command's outcome (§2.5). */
export interface ForegroundOutcome {
  /** The exit code (125: could not cd; -1: lost track). */
  exit_code: number;
  /** How long it ran. */
  duration_ms: number;
  /** The timeout ended it. */
  timed_out: boolean;
  /** The call was cancelled. */
  cancelled: boolean;
  /** The tail of stdout. */
  stdout: string;
  /** The tail of stderr. */
  stderr: string;
  /** All stdout bytes. */
  stdout_bytes: number;
  /** All stderr bytes. */
  stderr_bytes: number;
  /** A tail is shorter than its stream. */
  truncated: boolean;
}
