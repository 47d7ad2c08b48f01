/**
 * The scripts a task or a foreground command runs as the agent user, built on the host.
 * Pure. Every client value (command, env values, cwd) reaches the shell single-quoted and
 * nothing else: a single-quoted word has no expansion at all, so `$(touch /x)` in an env
 * value or a cwd stays those characters. Names and ids are checked against strict patterns
 * before they are placed anywhere; NUL, which no argv or file can carry faithfully, is
 * refused. A task's run script reaches the guest base64-encoded; a foreground command's
 * exports and command are each one argv element of its login shell.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** Task ids wherever they touch paths and unit names (spec §3.1). */
export const TASK_ID_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
/** Environment variable names (spec §2). */
export const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Idempotency keys (spec §2). */
export const KEY_RE = /^[A-Za-z0-9._:-]{1,64}$/;
/** Guest user names. */
export const USER_RE = /^[a-z_][a-z0-9_-]{0,31}$/;

/** Single-quotes `s` for a POSIX shell: no expansion of any kind happens inside. */
export function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** Throws `invalid` unless `id` is a task id. */
export function checkTaskId(id: string): void {
  if (!TASK_ID_RE.test(id)) {
    throw new IsbError("invalid", `invalid task id "${id}": use 1-64 of a-z, 0-9 and -`);
  }
}

/** What a command runs with. */
export interface CommandSpec {
  /** The command, run as `bash -c`. */
  command: string;
  /** Variables exported before it runs. */
  env?: Record<string, string> | undefined;
  /** Working directory (relative: to the user's home; default: home). */
  cwd?: string | undefined;
}

function checkSpec(o: CommandSpec): void {
  if (typeof o.command !== "string" || o.command.includes("\0")) {
    throw new IsbError("invalid", "command: must be a string without NUL");
  }
  for (const [k, v] of Object.entries(o.env ?? {})) {
    if (!ENV_NAME_RE.test(k)) {
      throw new IsbError(
        "invalid",
        `env: invalid variable name "${k}": use [A-Za-z_][A-Za-z0-9_]*`,
      );
    }
    if (typeof v !== "string" || v.includes("\0")) {
      throw new IsbError("invalid", `env: ${k} must be a string without NUL`);
    }
  }
  if (o.cwd !== undefined && (typeof o.cwd !== "string" || o.cwd.includes("\0"))) {
    throw new IsbError("invalid", "cwd: must be a string without NUL");
  }
}

function exports(env: Record<string, string> | undefined): string {
  return Object.entries(env ?? {}).map(([k, v]) => `export ${k}=${shQuote(v)}\n`).join("");
}

function cdLine(cwd: string | undefined): string {
  return cwd === undefined || cwd === "" ? "cd" : `cd -- ${shQuote(cwd)}`;
}

/**
 * The run script of a command task (`run-1.sh`): output to the task's `stdout`/`stderr`,
 * `ISX_MCP_TASK` exported, `cd` failure → 125, the physical cwd and then the exit code
 * recorded (each written aside, then renamed).
 */
export function commandRunScript(taskId: string, o: CommandSpec): string {
  checkTaskId(taskId);
  checkSpec(o);
  return [
    `d=\${BASH_SOURCE[0]%/*}`,
    `exec </dev/null >"$d/stdout" 2>"$d/stderr"`,
    exports(o.env) + `export ISX_MCP_TASK=${taskId}`, // after env: the marker cannot be overridden
    "rc=0",
    `if ${cdLine(o.cwd)}; then`,
    `  pwd -P >"$d/.cwd.tmp" && mv -fT "$d/.cwd.tmp" "$d/cwd"`,
    `  bash -c ${shQuote(o.command)}; rc=$?`,
    `else rc=125; fi`,
    `printf '%s\\n' "$rc" >"$d/.exit-1.tmp" && mv -fT "$d/.exit-1.tmp" "$d/exit-1"`,
    "",
  ].join("\n");
}

/**
 * What a foreground command's login shell runs before the command (the exports), after
 * checking the command, env and cwd: the command and the cwd travel apart (an argument and
 * the stdin gate of guest/_foreground_shell.ts), so NUL, which neither can carry, is refused.
 */
export function foregroundSetup(o: CommandSpec): string {
  checkSpec(o);
  return exports(o.env);
}

/** Base64 of UTF-8 text (the form scripts travel in). */
export function toBase64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(bin);
}

/** Decodes base64 to bytes; undefined when `s` is not base64. */
export function fromBase64(s: string): Uint8Array | undefined {
  try {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}
