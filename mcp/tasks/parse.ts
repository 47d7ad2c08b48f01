/**
 * The host's reading of what guest/task_shell.ts prints: fact lines (probe, listing) and the
 * status read. Pure. Everything here was written by the guest, where an agent is root, so
 * every value is re-validated (ids, numbers, model names, keys, paths) and anything that
 * fails is dropped, never passed on; output that is cut anywhere parses to what it holds
 * and never throws.
 *
 * @module
 */

import { type Decided, decideState, type TaskFacts } from "./state.ts";
import { fromBase64, KEY_RE, TASK_ID_RE } from "./script.ts";

/** Model names a task may record (spec §2). */
export const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,119}$/;
/** Agent session ids (Claude's UUIDs, Codex thread ids, opencode's `ses_…`). */
export const SESSION_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$/;

/** A task's kind (spec §3.1). */
export type TaskKind = "command" | "agent";

/** One task's status (spec §3.4), from one exec. */
export interface TaskStatus {
  /** The task id. */
  task_id: string;
  /** running, finished, lost or unknown (attached is derived by the caller). */
  state: Decided["state"];
  /** The current run (0 when lost without a record). */
  run: number;
  /** The kind the launch recorded. */
  kind?: TaskKind;
  /** The exit code once finished (absent when the exit file was unreadable). */
  exit_code?: number;
  /** When the current run started: the mtime of `current` (ISO 8601). */
  started_at?: string;
  /** The newest mtime of the run's output files (ISO 8601). */
  last_activity?: string;
  /** Size of stdout (agent: of `events-<n>.jsonl`). */
  stdout_bytes: number;
  /** Size of stderr (agent: of `stderr-<n>.log`). */
  stderr_bytes: number;
  /** The last bytes of stdout (agent: of the events log), decoded as UTF-8. */
  stdout_tail: string;
  /** The last bytes of stderr. */
  stderr_tail: string;
  /** The run's physical working directory. */
  cwd?: string;
  /** The agent session id. */
  session_id?: string;
  /** The recorded model. */
  model?: string;
  /** The recorded turn limit (older records). */
  max_turns?: number;
  /** The idempotency key recorded at launch. */
  key?: string;
  /** The pid of a person in the agent's conversation (0: present, pid unreadable). */
  person?: number;
}

/** One task directory, as the adoption listing reports it (spec §3.4). */
export interface TaskListing {
  /** The task id. */
  task_id: string;
  /** The kind, when recorded and valid. */
  kind?: TaskKind;
  /** The decided state of its current run. */
  state: Decided["state"];
  /** The current run. */
  run: number;
  /** The exit code, when finished. */
  exit_code?: number;
  /** The recorded model, when valid. */
  model?: string;
  /** The recorded turn limit, when a positive integer. */
  max_turns?: number;
  /** The idempotency key, when valid. */
  key?: string;
  /** The recorded physical cwd, when an absolute path without control characters. */
  cwd?: string;
}

function exitOf(s: string | undefined): number | "invalid" | undefined {
  if (s === undefined || s === "-") return undefined;
  return /^\d{1,3}$/.test(s) && Number(s) <= 255 ? Number(s) : "invalid";
}

/** Parses one fact line `id run exit unit cancel_age exit_again`; undefined when malformed. */
export function parseFacts(line: string): { id: string; facts: TaskFacts } | undefined {
  const p = line.split(" ");
  if (p.length < 6) return undefined;
  const [id, run, exit, unit, age, again] = p as [string, string, string, string, string, string];
  if (!TASK_ID_RE.test(id)) return undefined;
  if (run !== "missing" && !/^\d{1,9}$/.test(run)) return undefined;
  const facts: TaskFacts = { run: run === "missing" ? "missing" : Number(run) };
  const x = exitOf(exit);
  if (x !== undefined) facts.exit = x;
  facts.unit = /^[a-z]{1,32}$/.test(unit) ? unit : "";
  if (/^-?\d{1,12}$/.test(age)) facts.cancelAge = Number(age);
  const xa = exitOf(again);
  if (xa !== undefined) facts.exitAgain = xa;
  return { id, facts };
}

/** Parses the probe's output into a decided state per task id. */
export function parseProbe(text: string): Map<string, Decided> {
  const out = new Map<string, Decided>();
  for (const line of text.split("\n").slice(0, -1)) { // whole lines only
    const f = parseFacts(line);
    if (f) out.set(f.id, decideState(f.facts));
  }
  return out;
}

function tail(b64: string | undefined): string {
  const bytes = b64 ? fromBase64(b64) : undefined;
  if (!bytes) return "";
  let i = 0; // a tail may start inside a UTF-8 sequence: skip its continuation bytes
  while (i < bytes.length && i < 3 && (bytes[i]! & 0xc0) === 0x80) i++;
  return new TextDecoder().decode(bytes.subarray(i));
}

function epochIso(s: string | undefined): string | undefined {
  return s !== undefined && /^\d{1,12}$/.test(s)
    ? new Date(Number(s) * 1000).toISOString()
    : undefined;
}

function count(s: string | undefined): number {
  return s !== undefined && /^\d{1,15}$/.test(s) ? Number(s) : 0;
}

function hasControl(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** The validated optional fields a task directory records. */
export function recorded(
  raw: { kind?: string; model?: string; maxTurns?: string; key?: string; cwd?: string },
): Pick<TaskListing, "kind" | "model" | "max_turns" | "key" | "cwd"> {
  const out: Pick<TaskListing, "kind" | "model" | "max_turns" | "key" | "cwd"> = {};
  if (raw.kind === "command" || raw.kind === "agent") out.kind = raw.kind;
  if (raw.model !== undefined && MODEL_RE.test(raw.model)) out.model = raw.model;
  if (raw.maxTurns !== undefined && /^[1-9]\d{0,5}$/.test(raw.maxTurns)) {
    out.max_turns = Number(raw.maxTurns);
  }
  if (raw.key !== undefined && KEY_RE.test(raw.key)) out.key = raw.key;
  const cwd = raw.cwd;
  if (
    cwd !== undefined && cwd.startsWith("/") && cwd.length <= 4096 && !hasControl(cwd)
  ) {
    out.cwd = cwd;
  }
  return out;
}

/** Parses a status read; a line cut short is ignored, absent fields stay absent. Never throws. */
export function parseStatus(taskId: string, out: string): TaskStatus {
  const sep = out.indexOf("\n---\n");
  const head = (sep < 0 ? out : out.slice(0, sep + 1)).split("\n").slice(0, -1); // whole lines
  const kv = new Map<string, string>();
  for (const l of head) {
    const i = l.indexOf("=");
    if (i > 0 && !kv.has(l.slice(0, i))) kv.set(l.slice(0, i), l.slice(i + 1));
  }
  const facts = kv.get("facts");
  const f = facts === undefined ? undefined : parseFacts(`${taskId} ${facts}`);
  const d: Decided = f ? decideState(f.facts) : { state: "unknown", run: 0 };
  const rest = sep < 0 ? [] : out.slice(sep + 5).split("\n");
  const errAt = rest.indexOf("---stderr");
  const outLine = rest.length > 1 && rest[0] !== "---stderr" ? rest[0] : undefined;
  const errLine = errAt >= 0 && rest.length > errAt + 2 ? rest[errAt + 1] : undefined;
  const st: TaskStatus = {
    task_id: taskId,
    state: d.state,
    run: d.run,
    stdout_bytes: count(kv.get("stdout_bytes")),
    stderr_bytes: count(kv.get("stderr_bytes")),
    stdout_tail: tail(outLine),
    stderr_tail: tail(errLine),
    ...recorded({
      ...opt("kind", kv.get("kind")),
      ...opt("model", kv.get("model")),
      ...opt("maxTurns", kv.get("max-turns")),
      ...opt("key", kv.get("key")),
      ...opt("cwd", kv.get("cwd")),
    }),
  };
  if (d.exit_code !== undefined) st.exit_code = d.exit_code;
  const started = epochIso(kv.get("started"));
  if (started) st.started_at = started;
  const activity = epochIso(kv.get("activity"));
  if (activity) st.last_activity = activity;
  const sid = kv.get("session_id");
  if (sid !== undefined && SESSION_ID_RE.test(sid)) st.session_id = sid;
  return st;
}

function opt<K extends string>(k: K, v: string | undefined): { [P in K]?: string } {
  return (v === undefined ? {} : { [k]: v }) as { [P in K]?: string };
}

/** Parses the adoption listing: a fact line plus `|kind|model|max-turns|key|cwd` per task. */
export function parseListing(out: string): TaskListing[] {
  const tasks: TaskListing[] = [];
  for (const line of out.split("\n").slice(0, -1)) { // whole lines only
    const bar = line.indexOf(" |");
    if (bar < 0) continue;
    const f = parseFacts(line.slice(0, bar));
    if (!f) continue;
    const fields = line.slice(bar + 2).split("|");
    const [kind, model, maxTurns, key] = fields.map((v) => v === "" ? undefined : v);
    const cwd = fields.length > 4 ? fields.slice(4).join("|") : undefined; // the rest: a path
    const d = decideState(f.facts);
    const t: TaskListing = {
      task_id: f.id,
      state: d.state,
      run: d.run,
      ...recorded({
        ...opt("kind", kind),
        ...opt("model", model),
        ...opt("maxTurns", maxTurns),
        ...opt("key", key),
        ...opt("cwd", cwd),
      }),
    };
    if (d.exit_code !== undefined) t.exit_code = d.exit_code;
    tasks.push(t);
  }
  return tasks;
}
