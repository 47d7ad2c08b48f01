/**
 * The host's reading of what guest runners write (guest/task_runner.ts): `state.json` and
 * `events.jsonl` of one task. Pure: the caller fetches the files (through the Incus file API)
 * and hands their text here.
 *
 * @module
 */

/** A task's state as the guest recorded it. */
export interface TaskRecord {
  /** The task id, also its directory name under the tasks root. */
  id: string;
  /** The command line the runner spawned, program first. */
  argv: string[];
  /** Whether the command is still running or has ended (including failing to spawn). */
  state: "running" | "finished";
  /** The guest process id of the command, once it has been spawned. */
  pid?: number;
  /** The command's exit status, 128 + signal number if a signal killed it, 127 if it never started. */
  exit_code?: number;
  /** Why the command could not be spawned. */
  error?: string;
  /** When the runner started the task (ISO 8601). */
  started_at: string;
  /** When the command ended (ISO 8601). */
  finished_at?: string;
}

/** One line of `events.jsonl`. */
export interface TaskEvent {
  /** When the runner recorded the event (ISO 8601). */
  at: string;
  /** What happened: spawned, exited, got a forwarded signal, or failed to spawn. */
  type: "start" | "exit" | "signal" | "error";
  /** Event-specific fields such as `pid`, `exit_code`, `signal` or `message`. */
  [k: string]: unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses `state.json`; throws TypeError on a record the runner cannot have written. */
export function parseTaskState(text: string): TaskRecord {
  const v: unknown = JSON.parse(text);
  if (
    !isObject(v) || typeof v.id !== "string" || !Array.isArray(v.argv) ||
    (v.state !== "running" && v.state !== "finished") || typeof v.started_at !== "string"
  ) {
    throw new TypeError("task state: not a runner record");
  }
  return v as unknown as TaskRecord;
}

/** Parses `events.jsonl`, skipping a torn last line (the runner may be mid-write). */
export function parseTaskEvents(text: string): TaskEvent[] {
  const out: TaskEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const v: unknown = JSON.parse(line);
      if (isObject(v) && typeof v.type === "string" && typeof v.at === "string") {
        out.push(v as TaskEvent);
      }
    } catch { /* a torn line: the next read sees it whole */ }
  }
  return out;
}
