/**
 * The task state rules of spec §3.3, as a pure function of the facts one guest exec
 * gathers (guest/task_shell.ts prints them in the order the rules need: the exit file,
 * then the supervisor's answer, then the exit file again, so a run that ends between two
 * reads is `finished`, never `lost`). Keeping the decision here, not in shell, lets one
 * table test cover the probe, the status read and the listing alike.
 *
 * @module
 */

/** The state word every tool reports (spec §3.3). */
export type TaskState = "running" | "finished" | "attached" | "lost" | "unknown";

/** What the guest saw of one task's current run; every field as printed, re-validated. */
export interface TaskFacts {
  /** The run number from `current`; 0 when there is none; `missing` when no directory. */
  run: number | "missing";
  /** The exit file's code; `invalid` when present but not a number; absent when no file. */
  exit?: number | "invalid";
  /** The supervisor's answer (`systemctl is-active`); "" when it did not answer. */
  unit?: string;
  /** Seconds since the `cancelling-<n>` stamp, when there is one. */
  cancelAge?: number;
  /** The exit file read again after asking the supervisor. */
  exitAgain?: number | "invalid";
}

/** A decided state of the current run. */
export interface Decided {
  /** The state word (never `attached`: that is derived from presence, §3.3 rule 4). */
  state: "running" | "finished" | "lost" | "unknown";
  /** The current run (0 for a lost task without `current`). */
  run: number;
  /** The exit code, for a finished run with a readable exit file. */
  exit_code?: number;
}

/** How long a `cancelling-<n>` stamp is trusted (spec §3.3, §11.2: under 5 minutes). */
export const CANCEL_STAMP_TRUST_S = 299;

function finished(run: number, exit: number | "invalid"): Decided {
  return exit === "invalid"
    ? { state: "finished", run }
    : { state: "finished", run, exit_code: exit };
}

/** Applies spec §3.3 rules 1-3 to one task's facts. */
export function decideState(f: TaskFacts): Decided {
  if (f.run === "missing" || f.run === 0) return { state: "lost", run: 0 };
  const run = f.run;
  if (f.exit !== undefined) return finished(run, f.exit);
  const unit = f.unit ?? "";
  if (unit === "active" || unit === "activating") return { state: "running", run };
  if (unit === "") return { state: "unknown", run };
  if (f.cancelAge !== undefined && f.cancelAge >= 0 && f.cancelAge <= CANCEL_STAMP_TRUST_S) {
    return { state: "running", run };
  }
  if (f.exitAgain !== undefined) return finished(run, f.exitAgain);
  return { state: "lost", run };
}

/** The probe's word for a decided state: only `running` keeps a task watched. */
export function probeWord(d: Decided): "running" | "done" | "unknown" {
  return d.state === "running" ? "running" : d.state === "unknown" ? "unknown" : "done";
}
