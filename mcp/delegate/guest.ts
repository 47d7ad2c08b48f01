/**
 * The guest edge of delegation: puts the agent runners (guest/agents, pushed as they are) in
 * an instance when its copy differs, checks the guest's Deno and resolves the task's working
 * directory (one exec), reads the agent a task recorded, and runs `get_diff`'s guest half.
 * Every value travels as an argv element or a file, never spliced into a shell line; reads
 * of files an agent could have replaced run as the agent user under `timeout`.
 *
 * @module
 */

import type { IncusClient } from "../../rpc/base.ts";
import {
  AGENT_RUNNER_FILES,
  type DiffCommand,
  type DiffResult,
  diffRunnerArgv,
  readAgentRunnerFile,
} from "../../guest/mod.ts";
import { GUEST_PATH } from "../host/guest.ts";
import { RefusalError } from "../errors.ts";

/** Where the runners live in a guest (root's, readable by all). */
export const RUNNER_DIR = "/opt/isx-runner";
/** The guest's Deno (templates get it at build). */
export const GUEST_DENO = "/usr/local/bin/deno";
/** The user agents run as. */
export const AGENT_USER = { uid: 1000, gid: 1000, name: "agentuser", home: "/home/agentuser" };

/** A task's directory in the guest. */
export function taskDir(taskId: string): string {
  return `${AGENT_USER.home}/.isx-mcp/tasks/${taskId}`;
}

const ENV = { PATH: GUEST_PATH, LANG: "C.UTF-8", HOME: AGENT_USER.home };
const dec = new TextDecoder();

let sources: Promise<{ hash: string; files: [string, string][] }> | undefined;

/** The runner files and a hash of them all (read once). */
function runnerSources() {
  sources ??= (async () => {
    const files: [string, string][] = [];
    for (const f of AGENT_RUNNER_FILES) files.push([f, await readAgentRunnerFile(f)]);
    const all = new TextEncoder().encode(files.map(([f, t]) => `${f}\0${t}\0`).join(""));
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
    return { hash: [...d].map((b) => b.toString(16).padStart(2, "0")).join(""), files };
  })();
  return sources;
}

const PREPARE_SH = `set -u
[ -x ${GUEST_DENO} ] || { echo "no ${GUEST_DENO}" >&2; exit 3; }
echo "hash=$(head -c 64 ${RUNNER_DIR}/.hash 2>/dev/null)"
c=$(runuser -u ${AGENT_USER.name} -- bash -c 'cd -- "$1" 2>/dev/null && pwd -P' isx "$1") || exit 4
echo "cwd=$c"
`;

/**
 * Readies an instance for an agent run: the guest's Deno is there, the runners are current,
 * `cwd` (absolute) exists; resolves to its physical path.
 */
export async function prepareGuest(
  incus: IncusClient,
  instance: string,
  cwd: string,
): Promise<string> {
  const src = await runnerSources();
  const r = await incus.execCapture(instance, ["bash", "-c", PREPARE_SH, "isx", cwd], {
    env: ENV,
    cwd: "/",
    timeoutMs: 60_000,
  });
  const out = dec.decode(r.stdout);
  if (r.exitCode === 3) {
    throw new RefusalError(
      "unavailable",
      `instance "${instance}" has no ${GUEST_DENO} for the agent runner; ask the user to rebuild its template (isx build)`,
    );
  }
  if (r.exitCode === 4) {
    throw new RefusalError("invalid_argument", `cwd "${cwd}" does not exist in "${instance}"`);
  }
  if (r.exitCode !== 0) {
    throw new RefusalError(
      "unavailable",
      `could not ready "${instance}" for the agent: exit ${r.exitCode}: ${
        dec.decode(r.stderr).trim().slice(-300)
      }`,
    );
  }
  const physical = /^cwd=(.*)$/m.exec(out)?.[1] ?? "";
  if (!/^\/[A-Za-z0-9._/-]*$/.test(physical) || physical.split("/").includes("..")) {
    throw new RefusalError(
      "invalid_argument",
      `cwd "${cwd}" resolves to "${physical}": the agent's directory may hold only A-Za-z0-9._/-`,
    );
  }
  if (/^hash=(.*)$/m.exec(out)?.[1] !== src.hash) await pushRunners(incus, instance, src);
  return physical;
}

/**
 * Puts the current runners in `instance` unless it has them (one exec, then the pushes only
 * when its hash differs); true when it pushed. The pool keeper readies members with it, so a
 * delegation claiming one finds them in place.
 */
export async function ensureRunners(incus: IncusClient, instance: string): Promise<boolean> {
  const src = await runnerSources();
  const r = await incus.execCapture(instance, ["head", "-c", "64", `${RUNNER_DIR}/.hash`], {
    env: ENV,
    cwd: "/",
    timeoutMs: 60_000,
  });
  if (r.exitCode === 0 && dec.decode(r.stdout) === src.hash) return false;
  await pushRunners(incus, instance, src);
  return true;
}

async function pushRunners(
  incus: IncusClient,
  instance: string,
  src: { hash: string; files: [string, string][] },
): Promise<void> {
  const mk = await incus.execCapture(instance, [
    "mkdir",
    "-p",
    `${RUNNER_DIR}/agents`,
    `${RUNNER_DIR}/diff`,
  ], { env: ENV, cwd: "/" });
  if (mk.exitCode !== 0) {
    throw new RefusalError("unavailable", `could not make ${RUNNER_DIR} in "${instance}"`);
  }
  const own = { mode: 0o644, uid: 0, gid: 0 };
  // all at once: each push is one request, and none depends on another
  await Promise.all(
    src.files.map(([f, text]) =>
      incus.pushFile(instance, `${RUNNER_DIR}/${f}`, text, { step: `push ${f}`, ...own })
    ),
  );
  // the hash last: a push cut short is pushed again next time
  await incus.pushFile(instance, `${RUNNER_DIR}/.hash`, src.hash, { step: "push hash", ...own });
}

/** What an agent task recorded in its directory (each only when present and well-formed). */
export interface AgentFacts {
  /** The agent. */
  agent?: string;
  /** The session to resume. */
  session_id?: string;
  /** The model override. */
  model?: string;
  /** The physical working directory. */
  cwd?: string;
  /** The current run. */
  run?: number;
}

const FACTS_SH = `d=$1
for f in agent session_id model cwd current; do
  [ -f "$d/$f" ] && printf '%s=%s\\n' "$f" "$(timeout 5 head -c 512 -- "$d/$f" | head -n 1)"
done
true`;

const FACT_RE: Record<string, RegExp> = {
  agent: /^[a-z]{1,16}$/,
  session_id: /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
  model: /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/,
  cwd: /^\/[A-Za-z0-9._/-]*$/,
  current: /^[1-9][0-9]{0,5}$/,
};

/** Parses FACTS_SH's lines, dropping what does not match its pattern. Pure. */
export function parseFacts(out: string): AgentFacts {
  const f: AgentFacts = {};
  for (const line of out.split("\n")) {
    const i = line.indexOf("=");
    const [k, v] = [line.slice(0, i), line.slice(i + 1).trim()];
    if (i < 1 || !FACT_RE[k]?.test(v) || (k === "cwd" && v.split("/").includes(".."))) continue;
    if (k === "current") f.run = Number(v);
    else (f as Record<string, string>)[k] = v;
  }
  return f;
}

/** Reads an agent task's recorded facts as the agent user (one exec). */
export async function agentFacts(
  incus: IncusClient,
  instance: string,
  taskId: string,
): Promise<AgentFacts> {
  const r = await incus.execCapture(instance, ["bash", "-c", FACTS_SH, "isx", taskDir(taskId)], {
    env: ENV,
    cwd: "/",
    user: AGENT_USER.uid,
    group: AGENT_USER.gid,
    timeoutMs: 60_000,
  });
  if (r.exitCode !== 0) {
    throw new RefusalError("unavailable", `could not read task ${taskId} in "${instance}"`);
  }
  return parseFacts(dec.decode(r.stdout));
}

/** get_diff's guest half for a task: its JSON answer, or a refusal. */
export async function guestDiff(
  incus: IncusClient,
  instance: string,
  taskId: string,
  cmd: Extract<DiffCommand, { sub: "diff" }>,
): Promise<DiffResult> {
  const argv = diffRunnerArgv({ deno: GUEST_DENO, scripts: RUNNER_DIR, dir: taskDir(taskId) }, {
    ...cmd,
    timeoutMs: cmd.timeoutMs ?? 300_000,
  });
  const r = await incus.execCapture(instance, argv, {
    env: ENV,
    cwd: AGENT_USER.home,
    user: AGENT_USER.uid,
    group: AGENT_USER.gid,
    timeoutMs: (cmd.timeoutMs ?? 300_000) + 30_000,
  });
  const out = dec.decode(r.stdout);
  if (r.exitCode === 3) {
    throw new RefusalError("unavailable", `get_diff for ${taskId} took too long and was stopped`);
  }
  if (r.exitCode !== 0) {
    throw new RefusalError(
      "unavailable",
      `get_diff for ${taskId} failed (exit ${r.exitCode}): ${
        (dec.decode(r.stderr) || out).trim().slice(-400)
      }`,
    );
  }
  let v: unknown;
  try {
    v = JSON.parse(out);
  } catch {
    throw new RefusalError("unavailable", `get_diff for ${taskId}: the guest answered no JSON`);
  }
  const d = v as DiffResult;
  if (!d || !Array.isArray(d.repos)) {
    throw new RefusalError(
      "unavailable",
      `get_diff for ${taskId}: the guest's answer has no repos`,
    );
  }
  return d;
}
