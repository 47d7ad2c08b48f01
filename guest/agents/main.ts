/**
 * The agent runner's entry in the guest: `deno run <grants> main.ts --dir D --run N --agent A`.
 * Everything else comes from the task directory the host wrote (`cwd`, `model`, `brief.md`,
 * `prompt-<n>.md`, read FIFO-safe), so nothing a client or agent sent travels on a command
 * line. Grants the
 * host gives it (runnerFlags): read/write of the task directory, read of the agent's config,
 * run of the one agent binary; no network, no environment reads beyond HOME.
 *
 * @module
 */

import { readRegular } from "../runner_io.ts";
import type { AgentName } from "./events.ts";
import { runAgent, type RunAgentOptions } from "./run.ts";
import { AGENT_NAMES } from "./table.ts";

const USAGE =
  "usage: main.ts --dir TASK_DIR --run N --agent claude|codex|pi|opencode [--mode task|ask]";

/** The runner's arguments. */
export interface RunnerArgs {
  /** The task directory. */
  dir: string;
  /** The run number. */
  run: number;
  /** Which agent. */
  agent: AgentName;
  /** `ask`: a one-shot answer (tools off, no session); `task` (default): a delegated run. */
  mode: "task" | "ask";
}

/** Parses the runner's arguments; TypeError with the usage on anything else. */
export function parseRunnerArgs(args: string[]): RunnerArgs {
  const v: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 2) {
    const [k, val] = [args[i]!, args[i + 1]];
    if (
      !["--dir", "--run", "--agent", "--mode"].includes(k) || val === undefined || k.slice(2) in v
    ) {
      throw new TypeError(`unexpected argument "${k}": ${USAGE}`);
    }
    v[k.slice(2)] = val;
  }
  const run = Number(v.run);
  if (!v.dir?.startsWith("/") || !Number.isInteger(run) || run < 1) {
    throw new TypeError(`--dir must be absolute and --run a positive integer: ${USAGE}`);
  }
  if (!AGENT_NAMES.includes(v.agent as AgentName)) {
    throw new TypeError(`unknown agent "${v.agent ?? ""}": ${USAGE}`);
  }
  const mode = v.mode ?? "task";
  if ((mode !== "task" && mode !== "ask") || (mode === "ask" && run !== 1)) {
    throw new TypeError(`--mode must be task, or ask with --run 1: ${USAGE}`);
  }
  return { dir: v.dir, run, agent: v.agent as AgentName, mode };
}

/** Runs the task's run from its directory; resolves to the exit code. */
export async function runnerMain(args: string[]): Promise<number> {
  const { dir, run, agent, mode } = parseRunnerArgs(args);
  const home = Deno.env.get("HOME") || "/";
  const opts: RunAgentOptions = {
    dir,
    run,
    agent,
    home,
    cwd: (await readRegular(`${dir}/cwd`, 4096))?.trim() || home,
    ...(mode === "ask" ? { oneShot: true } : {}),
  };
  const model = (await readRegular(`${dir}/model`, 4096))?.trim();
  if (model) opts.model = model;
  const brief = await readRegular(`${dir}/brief.md`, 256 * 1024);
  if (brief?.trim()) opts.brief = brief;
  return (await runAgent(opts)).exitCode;
}

if (import.meta.main) {
  try {
    Deno.exit(await runnerMain(Deno.args));
  } catch (e) {
    Deno.stderr.writeSync(new TextEncoder().encode(`isx agent runner: ${(e as Error).message}\n`));
    Deno.exit(2);
  }
}
