/**
 * The one way the task engine runs its guest scripts: `bash -c SCRIPT isx USER ARG...` as
 * root through the Incus client, so that a wrapped client sees (and a test can count) every
 * exec. Without stdin it uses Incus's recorded output (one POST and one wait, the cheapest
 * exec measured: ~13 ms against ~18 ms for websockets); with stdin, the websocket exec.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/mod.ts";
import { execRecorded, GUEST_PATH } from "../host/guest.ts";

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
  if (o.stdin !== undefined && o.stdin !== "") {
    const r = await incus.execCapture(instance, argv, {
      stdin: o.stdin,
      env: SCRIPT_ENV,
      cwd: "/",
      ...(o.deadlineMs ? { timeoutMs: o.deadlineMs } : {}),
    });
    const dec = new TextDecoder();
    return { code: r.exitCode, stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr) };
  }
  const r = await execRecorded(incus, instance, argv, {
    step: o.step,
    env: SCRIPT_ENV,
    cwd: "/",
    deadlineMs: o.deadlineMs ?? 60_000,
  });
  return { code: r.exitCode, stdout: r.stdout, stderr: r.stderr };
}

/** The error for a guest script that exited non-zero: the step, the code, stderr's end. */
export function scriptFailed(step: string, instance: string, r: ScriptResult): IsbError {
  const err = r.stderr.trim().split("\n").slice(-3).join(" | ");
  return new IsbError(
    "operation_failed",
    `${step} in "${instance}": exit ${r.code}${err ? `: ${err}` : ""}`,
  );
}
