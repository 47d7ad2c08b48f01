/**
 * The task engine: background command tasks whose state lives in the guest (spec §3), read
 * back with one exec per question, and foreground commands (foreground.ts). Every call is
 * one exec of a guest/task_shell.ts script through the injected Incus client; the state
 * decision is the pure state.ts, the reading the pure parse.ts.
 *
 * @module
 */

import { type Clock, type IncusClient, IsbError, SYSTEM_CLOCK } from "../../rpc/base.ts";
import { CANCEL_SH, LAUNCH_SH, LIST_SH, PROBE_SH, QUIET_SH, STATUS_SH } from "../../guest/mod.ts";
import { runGuestScript, scriptFailed } from "./guest_exec.ts";
import {
  parseListing,
  parseProbe,
  parseStatus,
  type TaskListing,
  type TaskStatus,
} from "./parse.ts";
import { checkTaskId, commandRunScript, KEY_RE, toBase64, USER_RE } from "./script.ts";
import { type Decided, probeWord } from "./state.ts";
import { attachedPids, parsePresence, type Presenced, withPresence } from "./presence.ts";
import { type ForegroundOptions, type ForegroundResult, runForeground } from "./foreground.ts";
import { MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES, STATUS_TAIL_BYTES } from "./tail.ts";

/** What the engine needs. */
export interface TaskEngineDeps {
  /** The Incus client every exec goes through. */
  incus: IncusClient;
  /** Time, for foreground durations and cancel waits (default: the system clock). */
  clock?: Clock;
  /** The guest user tasks run as (default `agentuser`). */
  user?: string;
}

/** A background command to start (spec §2.5 `background`). */
export interface StartCommandOptions {
  /** The task id (`t<n>-<tag>`; `[a-z0-9-]`). */
  taskId: string;
  /** The command, run as `bash -c`. */
  command: string;
  /** Variables exported for it. */
  env?: Record<string, string>;
  /** Working directory (relative: to home). */
  cwd?: string;
  /** The idempotency key, recorded in the task directory. */
  key?: string;
}

/** One run to launch (the general form; agent runs come from the delegation issue). */
export interface LaunchOptions {
  /** The task id. */
  taskId: string;
  /** The run number (1 creates the task directory; later runs need it). */
  run: number;
  /** The task's kind. */
  kind: "command" | "agent";
  /** The run script's text (bash), as built by the caller with values single-quoted. */
  script: string;
  /** The run's instruction, written to `prompt-<n>.md` from stdin. */
  prompt?: string;
  /** The idempotency key (run 1). */
  key?: string;
  /** More files of the task, written before the run starts (e.g. `brief.md`, `model`). */
  files?: Record<string, string>;
}

/** Names a launch may write besides its own files (never the engine's state files). */
export const EXTRA_FILE_RE = /^[a-z][a-z0-9_.-]{0,31}$/;
const RESERVED_RE =
  /^(current|kind|key|stdout|stderr|(exit|cancelling|run|prompt|events|stderr)-.*)$/;

/** A command task's output (spec §2.9, command kind). */
export interface CommandResult {
  /** The task id. */
  task_id: string;
  /** Its state (a running task is for the caller to refuse). */
  state: TaskStatus["state"];
  /** The exit code once finished. */
  exit_code?: number;
  /** The last `outputBytes` of stdout. */
  stdout: string;
  /** The last `outputBytes` of stderr. */
  stderr: string;
  /** All of stdout's size. */
  stdout_bytes: number;
  /** All of stderr's size. */
  stderr_bytes: number;
  /** True when either tail is shorter than its stream. */
  truncated: boolean;
}

/** The engine the MCP tools call. */
export interface TaskEngine {
  /** Foreground command: streamed lines, capped tails, timeout, cancel kills its session. */
  runForeground(instance: string, o: ForegroundOptions): Promise<ForegroundResult>;
  /** Starts a background command task with one exec; the guest's files are the truth. */
  startCommand(instance: string, o: StartCommandOptions): Promise<{ task_id: string; run: number }>;
  /** Launches one run of any kind with one exec (the prompt travels on stdin). */
  launch(instance: string, o: LaunchOptions): Promise<{ task_id: string; run: number }>;
  /** One task's status with output tails, in one exec (spec §3.4). */
  status(
    instance: string,
    taskId: string,
    o?: { tailBytes?: number; stderrTailBytes?: number },
  ): Promise<TaskStatus>;
  /** The cheap probe: one exec for any number of tasks; absent ids read `unknown`. */
  probe(instance: string, taskIds: string[]): Promise<Map<string, "running" | "done" | "unknown">>;
  /**
   * The probe plus the presence scan (the watcher's slow rounds, `send_message`): each
   * task's state with spec §3.3 rule 4 applied (`attached`, `attached_pid`).
   */
  probePresence(instance: string, taskIds: string[]): Promise<Map<string, Presenced>>;
  /** The probe with each task's decided state, run and exit code. */
  probeStates(
    instance: string,
    taskIds: string[],
    o?: { deadlineMs?: number },
  ): Promise<Map<string, Decided>>;
  /** Every task directory in the instance, re-validated (adoption, spec §3.4 listing). */
  list(instance: string, o?: { deadlineMs?: number }): Promise<TaskListing[]>;
  /**
   * Whether a person is present (a pseudo-terminal other than the console's) and the age
   * (ms, guest clock) of the newest agent task-file write, undefined without agents.
   */
  presence(instance: string): Promise<{ present: boolean; writeAgeMs?: number }>;
  /**
   * Stops tasks and everything they started: TERM, 2 s, KILL; 143 when no exit (§3.6).
   * Resolves to each task's state read in the same exec, afterwards (for the watcher).
   */
  cancel(instance: string, taskIds: string[]): Promise<Map<string, Decided>>;
  /** A command task's output tails and exit (spec §2.9). */
  result(instance: string, taskId: string, o: { outputBytes: number }): Promise<CommandResult>;
}

function clampTail(n: number | undefined, dflt: number): number {
  if (n === undefined) return dflt;
  if (!Number.isFinite(n)) throw new IsbError("invalid", "tail size: must be a number");
  return Math.min(MAX_OUTPUT_BYTES, Math.max(MIN_OUTPUT_BYTES, Math.floor(n)));
}

function checkIds(ids: string[]): void {
  for (const id of ids) checkTaskId(id);
}

/** Builds the engine over an Incus client. */
export function createTaskEngine(deps: TaskEngineDeps): TaskEngine {
  const { incus } = deps;
  const clock = deps.clock ?? SYSTEM_CLOCK;
  const user = deps.user ?? "agentuser";
  if (!USER_RE.test(user)) throw new IsbError("invalid", `invalid guest user "${user}"`);
  const script = (
    instance: string,
    sh: string,
    args: string[],
    o: { step: string; stdin?: string; deadlineMs?: number },
  ) => runGuestScript(incus, instance, sh, args, { user, ...o });

  const launch = async (instance: string, o: LaunchOptions) => {
    checkTaskId(o.taskId);
    if (!Number.isInteger(o.run) || o.run < 1) throw new IsbError("invalid", "run: must be ≥ 1");
    if (o.key !== undefined && !KEY_RE.test(o.key)) {
      throw new IsbError(
        "invalid",
        `invalid idempotency key "${o.key}": use 1-64 of A-Za-z0-9._:-`,
      );
    }
    const extra: string[] = [];
    for (const [name, content] of Object.entries(o.files ?? {})) {
      if (!EXTRA_FILE_RE.test(name) || RESERVED_RE.test(name)) {
        throw new IsbError("invalid", `launch file "${name}": not a name a launch may write`);
      }
      extra.push(name, toBase64(content));
    }
    const step = `launch task ${o.taskId}`;
    const r = await script(
      instance,
      LAUNCH_SH,
      [o.taskId, String(o.run), o.kind, o.key ?? "", toBase64(o.script), ...extra],
      { step, ...(o.prompt ? { stdin: o.prompt } : {}) },
    );
    if (r.code === 17) {
      throw new IsbError("already_exists", `task ${o.taskId} already exists in "${instance}"`);
    }
    const busy = r.code === 16 ? /agent task ([a-z0-9-]{1,64}) is running/.exec(r.stderr) : null;
    if (busy) {
      throw new IsbError(
        "operation_failed",
        `launch task ${o.taskId} in "${instance}": agent task ${busy[1]} is running there`,
        { data: { agent_busy: busy[1] } },
      );
    }
    if (r.code !== 0) throw scriptFailed(step, instance, r);
    return { task_id: o.taskId, run: o.run };
  };

  const probeStates = async (instance: string, ids: string[], o: { deadlineMs?: number } = {}) => {
    checkIds(ids);
    if (ids.length === 0) return new Map<string, Decided>();
    const step = "probe tasks";
    const r = await script(instance, PROBE_SH, ids, { step, ...o });
    if (r.code !== 0) throw scriptFailed(step, instance, r);
    const seen = parseProbe(r.stdout);
    const out = new Map<string, Decided>();
    for (const id of ids) out.set(id, seen.get(id) ?? { state: "unknown", run: 0 });
    return out;
  };

  const status = async (
    instance: string,
    taskId: string,
    o: { tailBytes?: number; stderrTailBytes?: number } = {},
  ) => {
    checkTaskId(taskId);
    const tb = clampTail(o.tailBytes, STATUS_TAIL_BYTES);
    const eb = clampTail(o.stderrTailBytes, tb);
    const step = `read task ${taskId}`;
    const r = await script(instance, STATUS_SH, [taskId, String(tb), String(eb)], { step });
    if (r.code !== 0) throw scriptFailed(step, instance, r);
    const st = parseStatus(taskId, r.stdout);
    const person = attachedPids(parsePresence(r.stdout)).get(taskId);
    if (person !== undefined) st.person = person;
    return st;
  };

  return {
    runForeground: (instance, o) => runForeground({ incus, clock, user }, instance, o),
    startCommand: async (instance, o) =>
      await launch(instance, {
        taskId: o.taskId,
        run: 1,
        kind: "command",
        script: commandRunScript(o.taskId, o),
        ...(o.key !== undefined ? { key: o.key } : {}),
      }),
    launch,
    status,
    probeStates,
    async probePresence(instance, ids) {
      checkIds(ids);
      if (ids.length === 0) return new Map();
      const step = "probe tasks and presence";
      const r = await script(instance, PROBE_SH, ["--presence", ...ids], { step });
      if (r.code !== 0) throw scriptFailed(step, instance, r);
      const seen = parseProbe(r.stdout);
      const people = attachedPids(parsePresence(r.stdout));
      return new Map(ids.map((id) => [
        id,
        withPresence(seen.get(id) ?? { state: "unknown", run: 0 }, people.get(id)),
      ]));
    },
    async probe(instance, ids) {
      const states = await probeStates(instance, ids);
      return new Map([...states].map(([id, d]) => [id, probeWord(d)]));
    },
    async list(instance, o = {}) {
      const step = "list tasks";
      const r = await script(instance, LIST_SH, [], { step, ...o });
      if (r.code !== 0) throw scriptFailed(step, instance, r);
      return parseListing(r.stdout);
    },
    async presence(instance) {
      const step = "read presence and agent task activity";
      const r = await script(instance, QUIET_SH, [], { step });
      const m = /^present ([01])\n(?:(-?\d{1,12})\n)?$/.exec(r.stdout);
      if (r.code !== 0 || !m) throw scriptFailed(step, instance, r);
      return {
        present: m[1] === "1",
        ...(m[2] !== undefined ? { writeAgeMs: Math.max(0, Number(m[2])) * 1000 } : {}),
      };
    },
    async cancel(instance, ids) {
      checkIds(ids);
      if (ids.length === 0) return new Map();
      const step = `cancel ${ids.join(", ")}`;
      const r = await script(instance, CANCEL_SH, ids, { step, deadlineMs: 120_000 });
      if (r.code !== 0) throw scriptFailed(step, instance, r);
      const seen = parseProbe(r.stdout);
      return new Map(ids.map((id) => [id, seen.get(id) ?? { state: "unknown", run: 0 }]));
    },
    async result(instance, taskId, o) {
      const n = clampTail(o.outputBytes, STATUS_TAIL_BYTES);
      const st = await status(instance, taskId, { tailBytes: n, stderrTailBytes: n });
      const res: CommandResult = {
        task_id: taskId,
        state: st.state,
        stdout: st.stdout_tail,
        stderr: st.stderr_tail,
        stdout_bytes: st.stdout_bytes,
        stderr_bytes: st.stderr_bytes,
        truncated: st.stdout_bytes > n || st.stderr_bytes > n,
      };
      if (st.exit_code !== undefined) res.exit_code = st.exit_code;
      return res;
    },
  };
}
