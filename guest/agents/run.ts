/**
 * One run of a delegated agent inside the instance: the I/O edge around the pure launch
 * builders and translators, on the shared task-directory layer (guest/runner_io.ts). Files
 * of run n (spec §3.2): `prompt-<n>.md` is piped to the agent's stdin, which is then closed
 * (three of the four agents wait for EOF); `events-<n>.jsonl` gets the translated events;
 * `stderr-<n>.log` the agent's stderr; `session_id` is written once the session is known
 * (for Pi only once Pi has saved its session file); `codex-usage.json` keeps Codex's running
 * token total, which the next run subtracts; `exit-<n>` comes last, and a cancel's exit
 * written first wins. Every file read is FIFO-safe. The agent is spawned without a shell; a
 * cancel signal to the runner is passed on to it. A one-shot run (`ask`) is the same run 1
 * with the agent's tools off where it allows and no `session_id` written.
 *
 * @module
 */

import {
  EventLog,
  onCancel,
  readRegular,
  type RunFiles,
  runFiles,
  signalExit,
  writeAside,
  writeExit,
  writeSessionOnce,
} from "../runner_io.ts";
import { agentLaunch, agentTranslator, type TranslatorContext } from "./table.ts";
import { CodexTranslator } from "./codex.ts";
import type { AgentName, ResultEvent, Translator, Usage } from "./events.ts";
import { LineBuffer } from "./events.ts";
import type { LaunchRequest } from "./launch.ts";

/** What to run. */
export interface RunAgentOptions {
  /** The task directory (holds prompt-<n>.md; receives the run's files). */
  dir: string;
  /** The run number. */
  run: number;
  /** Which agent. */
  agent: AgentName;
  /** The working directory of the agent. */
  cwd: string;
  /** The model override, if any. */
  model?: string;
  /** The brief for the agent's system prompt (or the head of run 1's prompt). */
  brief?: string;
  /** The agent's home (for opencode's configured model). */
  home: string;
  /** The agent's program (default: its name, found on PATH). */
  program?: string;
  /** A one-shot answer (`ask`): tools off where the agent allows, no session recorded. */
  oneShot?: boolean;
}

/** How the run ended. */
export interface RunAgentOutcome {
  /** The code for `exit-<n>`: the agent's, or 1 when it failed while exiting 0. */
  exitCode: number;
  /** The final event. */
  result: ResultEvent;
}

/** Codex's thread usage at the end of the last run (its reports are running totals). */
const CODEX_USAGE = "codex-usage.json";
const USAGE_KEYS = [
  "input_tokens",
  "output_tokens",
  "cache_read_input_tokens",
  "cache_creation_input_tokens",
] as const;

async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse((await readRegular(path, 64 * 1024)) ?? "null");
  } catch {
    return null;
  }
}

/** The session file Pi keeps for a task. */
export function piSessionFile(dir: string): string {
  return `${dir}/pi-session.jsonl`;
}

/** Pi's session id, once Pi has saved the file: the `id` of its first line. */
async function piSavedSession(dir: string): Promise<string | undefined> {
  const text = await readRegular(piSessionFile(dir), 64 * 1024).catch(() => undefined);
  try {
    const v = JSON.parse(text?.split("\n", 1)[0] || "null");
    return typeof v?.id === "string" ? v.id : undefined;
  } catch {
    return undefined;
  }
}

/** opencode's configured model; read-only (the runner may not write the agent's config). */
async function opencodeConfiguredModel(home: string): Promise<string | undefined> {
  const path = `${home}/.config/opencode/opencode.json`;
  try {
    if (!(await Deno.lstat(path)).isFile) return undefined; // never open a FIFO
    const v = JSON.parse(await Deno.readTextFile(path));
    return typeof v?.model === "string" ? v.model : undefined;
  } catch {
    return undefined;
  }
}

async function tail(path: string, bytes: number): Promise<string> {
  const all = await Deno.readFile(path).catch(() => new Uint8Array());
  return new TextDecoder().decode(all.subarray(Math.max(0, all.length - bytes)));
}

/** Runs the agent once and writes the run's files; resolves once `exit-<n>` is there. */
export async function runAgent(opts: RunAgentOptions): Promise<RunAgentOutcome> {
  const files = runFiles(opts.dir, opts.run);
  const log = await EventLog.open(files.events);
  try {
    const outcome = await runOnce(opts, files, log);
    await writeExit(files, outcome.exitCode);
    return outcome;
  } finally {
    log.close();
  }
}

async function runOnce(opts: RunAgentOptions, f: RunFiles, log: EventLog) {
  const { dir, run, agent } = opts;
  const refuse = async (message: string, code: number): Promise<RunAgentOutcome> => {
    const result: ResultEvent = {
      type: "result",
      subtype: "error_during_execution",
      is_error: true,
      result: message,
      permission_denials: [],
    };
    await log.append([result]);
    return { exitCode: code, result };
  };
  const prompt = await readRegular(f.prompt);
  if (prompt === undefined) return await refuse(`no prompt-${run}.md in ${dir}`, 2);
  const recorded = run > 1 ? (await readRegular(f.session, 256))?.trim() : undefined;
  if (agent === "pi" && run > 1 && (!recorded || (await piSavedSession(dir)) !== recorded)) {
    // Pi would open a new session at a missing path: the run fails and opens none.
    return await refuse(`pi's session ${recorded || "(none)"} is not saved in ${dir}`, 2);
  }
  const req: LaunchRequest = { agent, run };
  if (opts.model !== undefined) req.model = opts.model;
  if (opts.brief !== undefined) req.brief = opts.brief;
  if (recorded) req.session = recorded;
  if (opts.oneShot) req.oneShot = true;
  else if (agent === "pi") req.sessionFile = piSessionFile(dir);
  if (agent === "opencode" && opts.model !== undefined && !opts.model.includes("/")) {
    const m = await opencodeConfiguredModel(opts.home);
    if (m !== undefined) req.configuredModel = m;
  }
  let launch;
  try {
    launch = agentLaunch(req);
  } catch (e) {
    if (e instanceof TypeError) return await refuse(e.message, 2);
    throw e;
  }
  const ctx: TranslatorContext = recorded ? { resume: recorded } : {};
  if (agent === "codex" && run > 1) {
    const base = await readJson(`${dir}/${CODEX_USAGE}`) as Record<string, unknown> | null;
    if (base && USAGE_KEYS.every((k) => Number.isFinite(base[k]))) {
      ctx.baseline = base as unknown as Usage;
    }
  }
  const tr = agentTranslator(agent, ctx);
  const stderr = await Deno.open(f.stderr, { write: true, create: true, truncate: true });
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(opts.program ?? launch.argv[0]!, {
      args: launch.argv.slice(1),
      cwd: opts.cwd,
      env: launch.env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    stderr.close();
    return await refuse(`cannot start ${launch.argv[0]}: ${(e as Error).message}`, 127);
  }
  let cancelledBy: Deno.Signal | undefined;
  const stopListening = onCancel((sig) => {
    cancelledBy = sig;
    try {
      child.kill(sig);
    } catch { /* already gone */ }
  });
  try {
    const feed = (async () => {
      const w = child.stdin.getWriter();
      // an agent that exits without reading its prompt closes the pipe: not the runner's error
      await w.write(new TextEncoder().encode(launch.promptPrefix + prompt)).catch(() => {});
      await w.close().catch(() => {});
    })();
    const [status] = await Promise.all([
      child.status,
      feed,
      child.stderr.pipeTo(stderr.writable),
      readEvents(child.stdout, tr, f, agent !== "pi" && run === 1 && !opts.oneShot, log),
    ]);
    let code = status.signal ? signalExit(status.signal) : status.code;
    if (cancelledBy && code === 0) code = signalExit(cancelledBy);
    let sessionSaved = false;
    if (agent === "pi" && !opts.oneShot) {
      const saved = await piSavedSession(dir);
      sessionSaved = saved !== undefined && saved === tr.sessionId;
      if (sessionSaved && run === 1) await writeSessionOnce(f, saved!);
    }
    if (tr instanceof CodexTranslator) {
      await writeAside(`${dir}/${CODEX_USAGE}`, JSON.stringify(tr.threadUsage) + "\n");
    }
    const final = tr.end({ code, stderrTail: await tail(f.stderr, 2000), sessionSaved });
    await log.append(final);
    const result = final.at(-1) as ResultEvent;
    return { exitCode: code !== 0 ? code : result.is_error ? 1 : 0, result };
  } finally {
    stopListening();
  }
}

async function readEvents(
  stdout: ReadableStream<Uint8Array>,
  tr: Translator,
  f: RunFiles,
  saveSession: boolean,
  log: EventLog,
): Promise<void> {
  const buf = new LineBuffer();
  const dec = new TextDecoder();
  let saved = false;
  const handle = async (lines: string[]) => {
    for (const l of lines) {
      await log.append(tr.line(l));
      if (saveSession && !saved && tr.sessionId !== undefined) {
        saved = true; // the session the first event names is the task's (seed 002)
        await writeSessionOnce(f, tr.sessionId).catch(() => {});
      }
    }
  };
  for await (const chunk of stdout) await handle(buf.push(dec.decode(chunk, { stream: true })));
  await handle(buf.push(dec.decode()));
  await handle(buf.flush());
}
