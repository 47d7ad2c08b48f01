/**
 * The host's reading of what guest runners write (guest/task_runner.ts): `state.json` and
 * `events.jsonl` of one task. Pure: the caller fetches the files (through the Incus file API)
 * and hands their text here.
 *
 * @module
 */

/** A task's state as the guest recorded it. */
export interface TaskRecord {
  id: string;
  argv: string[];
  state: "running" | "finished";
  pid?: number;
  exit_code?: number;
  error?: string;
  started_at: string;
  finished_at?: string;
}

/** One line of `events.jsonl`. */
export interface TaskEvent {
  at: string;
  type: "start" | "exit" | "signal" | "error";
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
