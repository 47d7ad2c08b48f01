/**
 * The one way the task engine runs its guest scripts: `bash -c SCRIPT isx USER ARG...` as
 * root through the Incus client, so that a wrapped client sees (and a test can count) every
 * exec. Websocket exec throughout: on a loaded host it measured as fast as or faster than
 * Incus's recorded output (which needs two log reads and two deletes after the wait), and
 * it carries stdin and a deadline that kills the command.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { GUEST_PATH } from "../host/guest.ts";

/** The environment guest scripts run with. */
export const SCRIPT_ENV: Record<string, string> = { PATH: GUEST_PATH, LANG: "C.UTF-8" };

/** A finished guest script. */
export interface ScriptResult {
  /** Its exit code. */
  code: number;
  /** Standard output. */
  stdout: string;
  /** Standard error. */
  stderr: string;
}

/** Runs one of guest/task_shell.ts's scripts in `instance` with `args` after the user. */
export async function runGuestScript(
  incus: IncusClient,
  instance: string,
  script: string,
  args: string[],
  o: { user: string; step: string; stdin?: string; deadlineMs?: number },
): Promise<ScriptResult> {
  const argv = ["bash", "-c", script, "isx", o.user, ...args];
  const r = await incus.execCapture(instance, argv, {
    env: SCRIPT_ENV,
    cwd: "/",
    timeoutMs: o.deadlineMs ?? 60_000,
    ...(o.stdin ? { stdin: o.stdin } : {}),
  }).catch((e) => {
    if (e instanceof IsbError) throw new IsbError(e.code, `${o.step}: ${e.message}`, { cause: e });
    throw e;
  });
  const dec = new TextDecoder();
  return { code: r.exitCode, stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr) };
}

/** The error for a guest script that exited non-zero: the step, the code, stderr's end. */
export function scriptFailed(step: string, instance: string, r: ScriptResult): IsbError {
  const err = r.stderr.trim().split("\n").slice(-3).join(" | ");
  return new IsbError(
    "operation_failed",
    `${step} in "${instance}": exit ${r.code}${err ? `: ${err}` : ""}`,
  );
}
