/**
 * How the host starts an agent runner in a guest: the runner's files (pushed as they are;
 * they import nothing outside `guest/`) and the `deno run` command line with the grants of
 * that one run: read and write of its task directory, read of the agent's own config for
 * opencode's model provider, run of the one agent binary, the HOME variable, nothing else.
 * Likewise `get_diff`'s guest half (guest/diff): the task directory, the cwd's tree for
 * finding repositories at run 1, the temporary directory and git. Pure.
 *
 * Every guest Deno process starts through {@link GUEST_DENO_ENV} (`env
 * DENO_NO_UPDATE_CHECK=1 deno …`): Deno's daily release check would look up and call its
 * download host from the guest, through the proxy, and count as the agent's traffic.
 *
 * @module
 */

import type { AgentName } from "./events.ts";

/** The runner's files, relative to `guest/`; `agents/main.ts` is the entry. */
export const AGENT_RUNNER_FILES = [
  "runner_io.ts",
  "agents/events.ts",
  "agents/launch.ts",
  "agents/claude.ts",
  "agents/codex.ts",
  "agents/pi.ts",
  "agents/opencode.ts",
  "agents/table.ts",
  "agents/run.ts",
  "agents/main.ts",
  "diff/core.ts",
  "diff/git.ts",
  "diff/main.ts",
] as const;

/** One of the runner's files. */
export type AgentRunnerFile = typeof AGENT_RUNNER_FILES[number];

/** What every guest `deno` command line starts with: the release check off (issue 19). */
export const GUEST_DENO_ENV: readonly string[] = ["/usr/bin/env", "DENO_NO_UPDATE_CHECK=1"];

/** Where a runner starts. */
export interface RunnerPlace {
  /** The guest's deno binary. */
  deno: string;
  /** The guest directory holding AGENT_RUNNER_FILES (laid out as in `guest/`). */
  scripts: string;
  /** The task directory. */
  dir: string;
  /** The run number. */
  run: number;
  /** Which agent. */
  agent: AgentName;
  /** The agent user's home. */
  home: string;
  /** `ask`: a one-shot answer (run 1, tools off, no session); default a task's run. */
  mode?: "task" | "ask";
}

/** The runner's command line, program first (no shell; every value is its own argument). */
export function agentRunnerArgv(p: RunnerPlace): string[] {
  if (!/^\/[A-Za-z0-9._/-]+$/.test(p.dir) || p.dir.includes("..")) {
    throw new TypeError(`invalid task directory "${p.dir}": an absolute path without ..`);
  }
  return [
    ...GUEST_DENO_ENV,
    p.deno,
    "run",
    "--no-config",
    "--no-lock",
    "--quiet",
    "--no-prompt",
    `--allow-read=${p.dir},${p.home}/.config/opencode`,
    `--allow-write=${p.dir}`,
    `--allow-run=${p.agent}`,
    "--allow-env=HOME",
    `${p.scripts}/agents/main.ts`,
    "--dir",
    p.dir,
    "--run",
    String(p.run),
    "--agent",
    p.agent,
    ...(p.mode === "ask" ? ["--mode", "ask"] : []),
  ];
}

/** A `get_diff` guest command: record the bases (run 1) or compare with them. */
export type DiffCommand =
  | { sub: "record"; cwd: string }
  | { sub: "diff"; path?: string; stat?: boolean; maxBytes?: number; timeoutMs?: number };

/** The command line of guest/diff/main.ts for one task directory (no shell). */
export function diffRunnerArgv(
  p: Pick<RunnerPlace, "deno" | "scripts" | "dir">,
  cmd: DiffCommand,
): string[] {
  const path = /^\/[A-Za-z0-9._/-]+$/;
  for (const d of [p.dir, ...(cmd.sub === "record" ? [cmd.cwd] : [])]) {
    if (!path.test(d) || d.split("/").includes("..")) {
      throw new TypeError(`invalid directory "${d}": an absolute path without ..`);
    }
  }
  const grants = cmd.sub === "record"
    ? [`--allow-read=${p.dir},${cmd.cwd}`, `--allow-write=${p.dir}`]
    : [`--allow-read=${p.dir}`, `--allow-write=${p.dir},/tmp`];
  const args = ["--dir", p.dir];
  if (cmd.sub === "diff") {
    if (cmd.path !== undefined) args.push("--path", cmd.path);
    if (cmd.stat) args.push("--stat");
    if (cmd.maxBytes !== undefined) args.push("--max-bytes", String(cmd.maxBytes));
    if (cmd.timeoutMs !== undefined) args.push("--timeout-ms", String(cmd.timeoutMs));
  }
  return [
    ...GUEST_DENO_ENV,
    p.deno,
    "run",
    "--no-config",
    "--no-lock",
    "--quiet",
    "--no-prompt",
    ...grants,
    "--allow-run=git",
    `${p.scripts}/diff/main.ts`,
    cmd.sub,
    ...args,
  ];
}

function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The run script of an agent run (`run-<n>.sh`, run by bash as the agent user): exports
 * `ISX_MCP_TASK`, at run 1 with a `cwd` records the repositories' commits (`base.txt`),
 * runs the runner with its output in `runner-<n>.log`, and records the
 * runner's own exit code when the runner could not (a crash) and no cancel did either.
 * Every value is single-quoted.
 */
export function agentRunScript(p: RunnerPlace & { task: string; cwd?: string }): string {
  if (!/^[a-z0-9-]{1,64}$/.test(p.task)) {
    throw new TypeError(`invalid task id "${p.task}": use [a-z0-9-]`);
  }
  const argv = agentRunnerArgv(p).map(shQuote).join(" ");
  const d = shQuote(p.dir);
  const n = p.run;
  // run 1 records the repositories' commits for get_diff first (a failure only loses the diff)
  const record = n === 1 && p.cwd !== undefined
    ? [`${diffRunnerArgv(p, { sub: "record", cwd: p.cwd }).map(shQuote).join(" ")} >/dev/null`]
    : [];
  return [
    `export ISX_MCP_TASK=${p.task}`,
    `exec </dev/null >>${d}/runner-${n}.log 2>&1`,
    ...record,
    `${argv}`,
    `rc=$?`,
    // the first exit wins: a link never replaces one the runner or a cancel wrote
    `printf '%s\\n' "$rc" >${d}/.exit-${n}.sh-tmp && ln ${d}/.exit-${n}.sh-tmp ${d}/exit-${n} 2>/dev/null`,
    `rm -f ${d}/.exit-${n}.sh-tmp`,
    `exit "$rc"`,
    "",
  ].join("\n");
}
