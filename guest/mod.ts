/**
 * Host side of the guest runners: which runner scripts exist and where their task files
 * live inside an instance. The scripts themselves import nothing and run in the guest. The
 * task engine's bash scripts (task_shell.ts) are text the host sends with each exec;
 * runner_io.ts is the task-directory I/O the agent runners share, pushed with them.
 *
 * @module
 */

import type { AgentRunnerFile } from "./agents/mod.ts";

export { runTask, type TaskSpec } from "./task_runner.ts";
export {
  AGENT_NAMES,
  AGENT_RUNNER_FILES,
  type AgentEvent,
  type AgentName,
  agentRunnerArgv,
  type AgentRunnerFile,
  agentRunScript,
  type DiffCommand,
  diffRunnerArgv,
  GUEST_DENO_ENV,
  type ResultEvent,
  type RunnerPlace,
} from "./agents/mod.ts";
export {
  CANCEL_SH,
  JOIN_SH,
  LAUNCH_SH,
  LIST_SH,
  PROBE_SH,
  QUIET_SH,
  STATUS_SH,
} from "./task_shell.ts";
export { FOREGROUND_KILL_SH, FOREGROUND_SH, foregroundArgv } from "./_foreground_shell.ts";
export {
  type DiffFile,
  type DiffResult,
  parseBases,
  parseNumstatZ,
  type RepoBase,
} from "./diff/core.ts";
export { parseTaskEvents, parseTaskState, type TaskEvent, type TaskRecord } from "./protocol.ts";

/** The runner scripts, embedded in the compiled binary with `--include guest/`. */
export const GUEST_SCRIPTS = ["task_runner.ts"] as const;

/** Where runners keep task directories inside an instance. */
export const GUEST_TASKS_ROOT = "/var/lib/isx/tasks";

/**
 * This directory: beside this module, or, when the program runs pre-built (a bundle, whose
 * chunks are elsewhere), `guest/` under the root its entry recorded (`rpc/prebuilt.ts`,
 * read here by its global's name: guest/ imports nothing outside guest/).
 */
function guestDir(): string {
  const pre = (globalThis as Record<symbol, { root: string } | undefined>)[
    Symbol.for("isx.prebuilt")
  ];
  return pre ? decodeURIComponent(new URL("guest", pre.root).pathname) : import.meta.dirname!;
}

/** Reads a runner script's source (to push it into an instance). */
export function readGuestScript(name: typeof GUEST_SCRIPTS[number]): Promise<string> {
  return Deno.readTextFile(`${guestDir()}/${name}`);
}

/** Reads one agent runner file's source (to push into an instance, to the same name). */
export function readAgentRunnerFile(name: AgentRunnerFile): Promise<string> {
  return Deno.readTextFile(`${guestDir()}/${name}`);
}
