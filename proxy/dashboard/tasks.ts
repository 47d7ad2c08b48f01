/**
 * The tasks the dashboard shows, as `isx mcp` reports them (`POST /tasks` on the ops port,
 * with the task-report token): the proxy never execs into a guest for a view, and the task
 * records live in the guests (shared/spec/isx-mcp.md §3), so the facts come from the one
 * program that already reads them: each state an MCP session learns (launch, a status
 * read, the watcher, cancel) is posted once per transition (docs/decisions.md). The board
 * keeps the last {@link TASKS_KEPT} tasks by id, each report replacing the last (a report
 * of an older run is dropped). Pure apart from the clock passed in.
 *
 * @module
 */

import { integer, optional, strictMapping, string } from "../config/shape.ts";

/** The state words (spec §3.3) plus `released` (another session adopted the instance). */
export const TASK_STATES = ["running", "finished", "attached", "lost", "released"] as const;

/** One task as reported. */
export interface TaskReport {
  /** The task id (`t<n>-<tag>`). */
  task_id: string;
  /** Its instance. */
  instance: string;
  /** `command` or `agent`. */
  kind: "command" | "agent";
  /** The current run. */
  run: number;
  /** The state word. */
  state: (typeof TASK_STATES)[number];
  /** Once finished, when known. */
  exit_code?: number;
  /** An agent task's agent (claude, codex, pi, opencode). */
  agent?: string;
  /** The model asked for, when one was. */
  model?: string;
  /** The command that joins the task's conversation (`isx shell … --task …`). */
  join?: string;
  /** The reporting session and its client's name. */
  session?: string;
  /** The client's name (from MCP `initialize`). */
  client?: string;
}

/** A task on the board: the report plus when the proxy first and last heard of it. */
export interface TaskRow extends TaskReport {
  /** Epoch ms of the first report. */
  first_seen: number;
  /** Epoch ms of the last report. */
  updated: number;
}

/** How many tasks are kept. */
export const TASKS_KEPT = 500;

const FIELDS = [
  "task_id",
  "instance",
  "kind",
  "run",
  "state",
  "exit_code",
  "agent",
  "model",
  "join",
  "session",
  "client",
] as const;

// deno-lint-ignore no-control-regex
const TEXT = { re: /^[^\u0000-\u001f\u007f]{1,300}$/, what: "a line of 1 to 300 characters" };

/** Checks one report's JSON (`invalid` naming the field otherwise). */
export function parseTaskReport(v: unknown): TaskReport {
  const o = strictMapping(v, [], FIELDS);
  const text = (k: string) => optional(o[k], (x) => string(x, [k], TEXT));
  const r: TaskReport = {
    task_id: string(o.task_id, ["task_id"], { re: /^[A-Za-z0-9_.-]{1,64}$/, what: "a task id" }),
    instance: string(o.instance, ["instance"], {
      re: /^([a-z0-9][a-z0-9-]{0,62}\/)?[A-Za-z0-9][A-Za-z0-9-]{0,62}$/,
      what: "an instance name",
    }),
    kind: string(o.kind, ["kind"], { re: /^(command|agent)$/, what: "command or agent" }) as
      | "command"
      | "agent",
    run: integer(o.run, ["run"], 0, 1_000_000),
    state: string(o.state, ["state"], {
      re: new RegExp(`^(${TASK_STATES.join("|")})$`),
      what: TASK_STATES.join(", "),
    }) as TaskReport["state"],
  };
  const exit = optional(o.exit_code, (x) => integer(x, ["exit_code"], -1, 255));
  if (exit !== undefined) r.exit_code = exit;
  for (const k of ["agent", "model", "join", "session", "client"] as const) {
    const t = text(k);
    if (t !== undefined) r[k] = t;
  }
  return r;
}

/** The reported tasks. */
export class TaskBoard {
  readonly #rows = new Map<string, TaskRow>();
  readonly #watchers = new Set<() => void>();
  #version = 0;

  /** Calls `fn` after every report taken; returns the unsubscribe. */
  watch(fn: () => void): () => void {
    this.#watchers.add(fn);
    return () => this.#watchers.delete(fn);
  }

  /** Takes a report at `now`; false when it is about an older run than the one known. */
  report(r: TaskReport, now: number): boolean {
    const cur = this.#rows.get(r.task_id);
    if (cur && (cur.instance !== r.instance || r.run < cur.run)) return false;
    this.#rows.delete(r.task_id); // re-inserted last: the map's order is least recent first
    const row: TaskRow = { ...cur, ...r, first_seen: cur?.first_seen ?? now, updated: now };
    if (r.exit_code === undefined) delete row.exit_code; // an exit code belongs to its report
    this.#rows.set(r.task_id, row);
    if (this.#rows.size > TASKS_KEPT) this.#rows.delete(this.#rows.keys().next().value!);
    this.#version++;
    for (const fn of this.#watchers) fn();
    return true;
  }

  /** Every task, most recently reported last (copies). */
  list(): TaskRow[] {
    return [...this.#rows.values()].map((r) => ({ ...r }));
  }

  /** Grows on every change. */
  get version(): number {
    return this.#version;
  }
}
