/**
 * The task engine of `isx mcp` (spec §3): foreground commands, background command tasks
 * whose state lives in the guest and is read back with one exec, the cheap probe, the
 * adoption listing, cancel, a command's result, the watcher that turns probes into one
 * `isx/task_changed` event per transition, `max_concurrent_tasks` reservations, and who is
 * in an agent's conversation (presence.ts: `attached`, `isx shell --task`). A
 * library: the MCP tools call it; it speaks no MCP. The guest half is guest/task_shell.ts.
 *
 * @module
 */

export {
  type CommandResult,
  createTaskEngine,
  EXTRA_FILE_RE,
  type LaunchOptions,
  type StartCommandOptions,
  type TaskEngine,
  type TaskEngineDeps,
} from "./engine.ts";
export type { ForegroundOptions, ForegroundResult } from "./foreground.ts";
export {
  MODEL_RE,
  parseFacts,
  parseListing,
  parseProbe,
  parseStatus,
  SESSION_ID_RE,
  type TaskKind,
  type TaskListing,
  type TaskStatus,
} from "./parse.ts";
export {
  agentOfArgv,
  attachedPids,
  joinCommand,
  parsePresence,
  personIn,
  type PresenceAgent,
  type Presenced,
  type PresenceProc,
  type PresenceScan,
  type PresenceTask,
  resumedSession,
  withPresence,
} from "./presence.ts";
export {
  CANCEL_STAMP_TRUST_S,
  type Decided,
  decideState,
  probeWord,
  type TaskFacts,
  type TaskState,
} from "./state.ts";
export {
  checkTaskId,
  commandRunScript,
  type CommandSpec,
  ENV_NAME_RE,
  foregroundSetup,
  KEY_RE,
  shQuote,
  TASK_ID_RE,
  toBase64,
} from "./script.ts";
export {
  DEFAULT_OUTPUT_BYTES,
  MAX_OUTPUT_BYTES,
  MAX_STDIN_BYTES,
  MIN_OUTPUT_BYTES,
  STATUS_TAIL_BYTES,
} from "./tail.ts";
export {
  type ChangeState,
  type TaskChange,
  TaskWatcher,
  type WatcherOptions,
  type WatchSource,
} from "./watcher.ts";
export {
  type BusyCounts,
  BusyElsewhere,
  PROBE_BOUND_MS,
  PROBE_COOLDOWN_MS,
  PROBE_SLOW_MS,
  refusal,
  type Reservation,
  type Reserved,
  TaskSlots,
} from "./limits.ts";
