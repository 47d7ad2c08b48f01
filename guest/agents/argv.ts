/**
 * How the host starts an agent runner in a guest: the runner's files (pushed as they are;
 * they import nothing outside this folder) and the `deno run` command line with the grants
 * of that one run: read and write of its task directory, read of the agent's own config for
 * opencode's model provider, run of the one agent binary, the HOME variable, nothing else.
 * Pure.
 *
 * @module
 */

import type { AgentName } from "./events.ts";

/** The runner's files, in this folder; `main.ts` is the entry. */
export const AGENT_RUNNER_FILES = [
  "events.ts",
  "launch.ts",
  "claude.ts",
  "codex.ts",
  "pi.ts",
  "opencode.ts",
  "table.ts",
  "run.ts",
  "main.ts",
] as const;

/** One of the runner's files. */
export type AgentRunnerFile = typeof AGENT_RUNNER_FILES[number];

/** Where a runner starts. */
export interface RunnerPlace {
  /** The guest's deno binary. */
  deno: string;
  /** The guest directory holding AGENT_RUNNER_FILES. */
  scripts: string;
  /** The task directory. */
  dir: string;
  /** The run number. */
  run: number;
  /** Which agent. */
  agent: AgentName;
  /** The agent user's home. */
  home: string;
}

/** The runner's command line, program first (no shell; every value is its own argument). */
export function agentRunnerArgv(p: RunnerPlace): string[] {
  if (!/^\/[A-Za-z0-9._/-]+$/.test(p.dir) || p.dir.includes("..")) {
    throw new TypeError(`invalid task directory "${p.dir}": an absolute path without ..`);
  }
  return [
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
    `${p.scripts}/main.ts`,
    "--dir",
    p.dir,
    "--run",
    String(p.run),
    "--agent",
    p.agent,
  ];
}
