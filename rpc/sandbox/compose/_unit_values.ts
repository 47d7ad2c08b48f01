/**
 * Values a compose service puts into guest paths and systemd unit lines, checked before use:
 * a secret's `target` (a file under `/run/secrets`), and the `User=`/`Group=` and
 * `WorkingDirectory=` of a supervised command's unit. A `..` would write a secret outside
 * `/run/secrets` (as root, anywhere in the guest), and a newline in a unit value would add
 * unit lines of its own (`ExecStartPre=`…), so both are refused with a message naming the
 * field. Pure.
 *
 * @module
 */

import { invalid } from "../../errors.ts";
import type { SandboxSpec } from "../spec/spec.ts";

/** Where secret files go; an absolute `target` must lie under it. */
export const SECRETS_DIR = "/run/secrets";

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const ACCOUNT = /^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/;

function segmentsProblem(path: string): string | undefined {
  if (CONTROL.test(path)) return "has a control character";
  const parts = path.split("/");
  if (parts.some((p) => p === ".." || p === ".")) return "has a . or .. segment";
  return undefined;
}

/** Why a secret `target` is refused, or undefined; absolute ones must be under /run/secrets. */
export function secretTargetProblem(target: string): string | undefined {
  const bad = segmentsProblem(target);
  if (bad) return bad;
  const rel = target.startsWith(`${SECRETS_DIR}/`) ? target.slice(SECRETS_DIR.length + 1) : target;
  if (rel.startsWith("/")) return `is absolute outside ${SECRETS_DIR}`;
  if (rel === "" || rel.split("/").some((p) => p === "")) return "has an empty path segment";
  return undefined;
}

/** The guest path of a secret file (target checked: see {@link secretTargetProblem}). */
export function secretPath(target: string): string {
  return target.startsWith("/") ? target : `${SECRETS_DIR}/${target}`;
}

/** Why a `user` (`NAME`, `UID`, `UID:GID`, `NAME:GROUP`) cannot go into `User=`, or undefined. */
export function unitUserProblem(user: string): string | undefined {
  if (CONTROL.test(user)) return "has a control character";
  const parts = user.split(":");
  if (parts.length > 2 || parts.some((p) => !ACCOUNT.test(p) || p.includes(".."))) {
    return "is not NAME, UID, UID:GID or NAME:GROUP (letters, digits, _ . -)";
  }
  return undefined;
}

/** Why a `working_dir` cannot go into `WorkingDirectory=`, or undefined: absolute, no `..`. */
export function workingDirProblem(dir: string): string | undefined {
  const bad = segmentsProblem(dir);
  if (bad) return bad;
  if (!dir.startsWith("/")) return "is not an absolute path";
  return undefined;
}

/** Throws `invalid` naming the field for the first refused value of `service`'s spec. */
export function checkUnitValues(service: string, spec: SandboxSpec): void {
  const s = `service ${JSON.stringify(service)}`;
  for (const [i, ref] of (spec.secrets ?? []).entries()) {
    const target = ref.target ?? ref.source;
    const p = secretTargetProblem(target);
    if (p) throw invalid(`${s}: secrets[${i}].target ${JSON.stringify(target)} ${p}`);
  }
  if (spec.user !== undefined) {
    const p = unitUserProblem(spec.user);
    if (p) throw invalid(`${s}: user ${JSON.stringify(spec.user)} ${p}`);
  }
  if (spec.working_dir !== undefined) {
    const p = workingDirProblem(spec.working_dir);
    if (p) throw invalid(`${s}: working_dir ${JSON.stringify(spec.working_dir)} ${p}`);
  }
}
