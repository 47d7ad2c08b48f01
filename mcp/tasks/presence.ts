/**
 * Who is in an agent task's conversation (spec §3.3 rule 4, §6.A.5, §12.4), decided on the
 * host from the facts the guest's presence scan prints (guest/presence_shell.ts). Pure, so
 * the four agents' process shapes and the attach rule are one table test.
 *
 * A person is in a task's conversation when a process of the task's agent runs without the
 * `ISX_MCP_TASK` marker (which every delegated run carries) and either carries the join's
 * `ISX_JOIN=<task>` marker, resumes the task's session, or runs in its recorded cwd; or when
 * the task's join lock is held (`isx shell --task` holds it for as long as the person is in).
 * Process shapes, as measured in `tpl-agents`: Claude Code and opencode are native binaries
 * (`claude --resume <id>`, `opencode --session <id>`); Codex is a node launcher whose native
 * child keeps the arguments (`codex resume <thread>`) and starts an `app-server` daemon, which
 * is not a conversation; Pi is `node …/pi` and renames itself `pi`, so its arguments are
 * gone and its cwd is what is left. Everything here came from the guest: a value that does
 * not parse is dropped.
 *
 * @module
 */

import { fromBase64, TASK_ID_RE } from "./script.ts";
import type { Decided, TaskState } from "./state.ts";
import { SESSION_ID_RE } from "./parse.ts";

/** The agents whose processes the scan knows. */
export type PresenceAgent = "claude" | "codex" | "pi" | "opencode";

/** What the scan printed of one task. */
export interface PresenceTask {
  /** The task id. */
  id: string;
  /** The recorded agent, when it is one of the four. */
  agent?: PresenceAgent;
  /** The recorded session id. */
  session?: string;
  /** The recorded physical cwd. */
  cwd?: string;
}

/** One process that looks like an agent. */
export interface PresenceProc {
  /** Its pid in the guest. */
  pid: number;
  /** The `ISX_MCP_TASK` it carries (a delegated run), if any. */
  mark?: string;
  /** The `ISX_JOIN` it carries (started by `isx shell --task`), if any. */
  join?: string;
  /** Its working directory. */
  cwd?: string;
  /** Its argv as /proc shows it (a renamed process shows its new name). */
  argv: string[];
}

/** Everything one scan printed. */
export interface PresenceScan {
  /** The tasks asked about. */
  tasks: PresenceTask[];
  /** The agent-looking processes. */
  procs: PresenceProc[];
  /** Held join locks: task id → the recorded holder pid (0 when unreadable). */
  locks: Map<string, number>;
}

const AGENTS: readonly PresenceAgent[] = ["claude", "codex", "pi", "opencode"];
const PID_RE = /^[1-9]\d{0,9}$/;
const B64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

function base(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

function agentName(name: string): PresenceAgent | undefined {
  const n = base(name).split(" ")[0]!.replace(/\.(exe|js|mjs|cjs)$/, "");
  if (n === "claude") return "claude";
  if (n === "codex" || n.startsWith("codex-")) return "codex";
  if (n === "pi") return "pi";
  if (n === "opencode" || n === ".opencode") return "opencode";
  return undefined;
}

/** The agent an argv belongs to and the arguments after its program, or undefined. */
export function agentOfArgv(argv: string[]): { agent: PresenceAgent; args: string[] } | undefined {
  const a0 = argv[0] ?? "";
  const direct = agentName(a0);
  if (direct) return { agent: direct, args: argv.slice(1) };
  if (!/^(node|nodejs|node\d+|bun)$/.test(base(a0))) return undefined;
  const a1 = argv[1] ?? "";
  const byPackage: [string, PresenceAgent][] = [
    ["claude-code", "claude"],
    ["/@openai/codex", "codex"],
    ["pi-coding-agent", "pi"],
    ["opencode-ai", "opencode"],
  ];
  const agent = byPackage.find(([p]) => a1.includes(p))?.[1] ?? agentName(a1);
  return agent ? { agent, args: argv.slice(2) } : undefined;
}

function optionValue(args: string[], names: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (names.includes(a) && i + 1 < args.length) return args[i + 1];
    for (const n of names) {
      if (n.startsWith("--") && a.startsWith(`${n}=`)) return a.slice(n.length + 1);
    }
  }
  return undefined;
}

/**
 * The session a process of `agent` resumes, from its arguments: Claude `--resume`/`-r`/
 * `--session-id`, Codex `resume <thread>` (also under `exec`), Pi `--session`, opencode
 * `--session`/`-s`.
 */
export function resumedSession(agent: PresenceAgent, args: string[]): string | undefined {
  switch (agent) {
    case "claude":
      return optionValue(args, ["--resume", "-r", "--session-id"]);
    case "codex": {
      const i = args.indexOf("resume");
      return i < 0 ? undefined : args.slice(i + 1).find((a) => !a.startsWith("-"));
    }
    case "pi":
      return optionValue(args, ["--session"]);
    case "opencode":
      return optionValue(args, ["--session", "-s"]);
  }
}

/** Whether a process of `agent` with these arguments is a conversation (not a daemon). */
function conversational(agent: PresenceAgent, args: string[]): boolean {
  return agent !== "codex" || !args.some((a) => a === "app-server" || a === "mcp-server");
}

function decode(b64: string | undefined): string | undefined {
  if (b64 === undefined || b64 === "-" || !B64_RE.test(b64)) return undefined;
  const bytes = fromBase64(b64);
  return bytes ? new TextDecoder().decode(bytes) : undefined;
}

function cleanPath(p: string | undefined): string | undefined {
  if (p === undefined || !p.startsWith("/") || p.length > 4096) return undefined;
  for (let i = 0; i < p.length; i++) if (p.charCodeAt(i) < 0x20) return undefined;
  return p;
}

/** Parses the scan's `presence …` lines out of any output; other lines are ignored. */
export function parsePresence(text: string): PresenceScan {
  const scan: PresenceScan = { tasks: [], procs: [], locks: new Map() };
  for (const line of text.split("\n")) {
    const f = line.split(" ");
    if (f[0] !== "presence") continue;
    if (f[1] === "task" && f.length === 6 && TASK_ID_RE.test(f[2]!)) {
      const t: PresenceTask = { id: f[2]! };
      if (AGENTS.includes(f[3] as PresenceAgent)) t.agent = f[3] as PresenceAgent;
      if (f[4] !== "-" && SESSION_ID_RE.test(f[4]!)) t.session = f[4]!;
      const cwd = cleanPath(decode(f[5]));
      if (cwd) t.cwd = cwd;
      scan.tasks.push(t);
    } else if (f[1] === "proc" && f.length === 7 && PID_RE.test(f[2]!)) {
      const argvText = decode(f[6]);
      if (argvText === undefined) continue;
      const argv = argvText.split("\0");
      if (argv.at(-1) === "") argv.pop();
      const p: PresenceProc = { pid: Number(f[2]), argv };
      if (f[3] !== "-" && TASK_ID_RE.test(f[3]!)) p.mark = f[3]!;
      if (f[4] !== "-" && TASK_ID_RE.test(f[4]!)) p.join = f[4]!;
      const cwd = cleanPath(decode(f[5]));
      if (cwd) p.cwd = cwd;
      scan.procs.push(p);
    } else if (f[1] === "lock" && f.length === 4 && TASK_ID_RE.test(f[2]!)) {
      scan.locks.set(f[2]!, PID_RE.test(f[3]!) ? Number(f[3]) : 0);
    }
  }
  return scan;
}

function resumes(t: PresenceTask, resumed: string | undefined): boolean {
  if (!resumed) return false;
  if (resumed === t.session) return true;
  // Pi resumes by its session file (the task's) or by an id prefix
  return t.agent === "pi" &&
    (resumed.endsWith(`/${t.id}/pi-session.jsonl`) ||
      (resumed.length >= 8 && t.session !== undefined && t.session.startsWith(resumed)));
}

/**
 * The pid of the person in task `t`'s conversation, or undefined: the oldest unmarked
 * process of its agent that carries its join marker, resumes its session or runs in its
 * cwd; else the holder of its join lock (0 when the lock's pid was unreadable, still
 * present).
 */
export function personIn(t: PresenceTask, scan: PresenceScan): number | undefined {
  const pids: number[] = [];
  for (const p of scan.procs) {
    if (p.mark !== undefined) continue; // a delegated run, not a person
    const shape = agentOfArgv(p.argv);
    if (!shape || (t.agent !== undefined && shape.agent !== t.agent)) continue;
    if (!conversational(shape.agent, shape.args)) continue;
    if (
      p.join === t.id || resumes(t, resumedSession(shape.agent, shape.args)) ||
      (t.cwd !== undefined && p.cwd === t.cwd)
    ) pids.push(p.pid);
  }
  if (pids.length) return Math.min(...pids);
  return scan.locks.get(t.id);
}

/** Each scanned task's person pid (tasks with nobody in their conversation are absent). */
export function attachedPids(scan: PresenceScan): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of scan.tasks) {
    const pid = personIn(t, scan);
    if (pid !== undefined) out.set(t.id, pid);
  }
  return out;
}

/** A decided state with presence applied. */
export interface Presenced {
  /** The state word, `attached` included. */
  state: TaskState;
  /** The current run. */
  run: number;
  /** The exit code, once finished. */
  exit_code?: number;
  /** The person's process, while one is in the conversation (absent when unreadable). */
  attached_pid?: number;
}

/**
 * Spec §3.3 rule 4: a finished run with a person in its conversation is `attached`; a run
 * still running stays `running`, with the person's pid beside it.
 */
export function withPresence(d: Decided, pid: number | undefined): Presenced {
  const out: Presenced = { state: d.state, run: d.run };
  if (d.exit_code !== undefined) out.exit_code = d.exit_code;
  if (pid === undefined || (d.state !== "finished" && d.state !== "running")) return out;
  if (d.state === "finished") out.state = "attached";
  if (pid > 0) out.attached_pid = pid;
  return out;
}

/** The command a person runs to join an agent task's conversation (`task_status.join_command`). */
export function joinCommand(taskId: string): string {
  return `isx shell --task ${taskId}`;
}
