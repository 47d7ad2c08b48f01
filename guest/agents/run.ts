/**
 * One run of a delegated agent inside the instance: the I/O edge around the pure launch
 * builders and translators. Files of run n in the task directory (spec §3.2):
 * `prompt-<n>.md` (read; piped to the agent's stdin, which is then closed: three of the
 * four agents wait for EOF), `events-<n>.jsonl` (the translated events, appended),
 * `stderr-<n>.log`, `session_id` (written aside then renamed once the session is known;
 * for Pi only once Pi has saved its session file), `codex-usage.json` (Codex's running token
 * total, which the next run subtracts) and `exit-<n>` (aside then renamed, last).
 * The agent is spawned without a shell; a SIGTERM or SIGINT to the runner is passed on to it.
 *
 * @module
 */

import { agentLaunch, agentTranslator, type TranslatorContext } from "./table.ts";
import { CodexTranslator } from "./codex.ts";
import type { AgentEvent, AgentName, ResultEvent, Translator, Usage } from "./events.ts";
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
  /** The agent's home (for opencode's configured model); default $HOME as the runner sees it. */
  home?: string;
}

/** How the run ended. */
export interface RunAgentOutcome {
  /** The code written to `exit-<n>`: the agent's, or 1 when it failed while exiting 0. */
  exitCode: number;
  /** The final event. */
  result: ResultEvent;
}

const enc = new TextEncoder();

/** Writes `text` to `path` through a temporary file and a rename: never seen half-written. */
export async function writeAside(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  await Deno.writeTextFile(tmp, text);
  await Deno.rename(tmp, path);
}

async function readIfThere(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

async function tail(path: string, bytes: number): Promise<string> {
  const all = await Deno.readFile(path).catch(() => new Uint8Array());
  return new TextDecoder().decode(all.subarray(Math.max(0, all.length - bytes)));
}

/** Codex's thread usage at the end of the last run (its reports are running totals). */
const CODEX_USAGE = "codex-usage.json";

async function readJson(path: string): Promise<unknown> {
  try {
    return JSON.parse((await readIfThere(path)) ?? "null");
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
  const text = await readIfThere(piSessionFile(dir));
  const first = text?.split("\n", 1)[0];
  try {
    const v = first ? JSON.parse(first) : undefined;
    return typeof v?.id === "string" ? v.id : undefined;
  } catch {
    return undefined;
  }
}

async function opencodeConfiguredModel(home: string): Promise<string | undefined> {
  const text = await readIfThere(`${home}/.config/opencode/opencode.json`).catch(() => undefined);
  try {
    const v = text ? JSON.parse(text) : undefined;
    return typeof v?.model === "string" ? v.model : undefined;
  } catch {
    return undefined;
  }
}

/** Runs the agent once and writes the run's files; resolves when `exit-<n>` is written. */
export async function runAgent(opts: RunAgentOptions): Promise<RunAgentOutcome> {
  const { dir, run } = opts;
  const events = await Deno.open(`${dir}/events-${run}.jsonl`, { append: true, create: true });
  const write = (evs: AgentEvent[]) =>
    evs.length === 0
      ? Promise.resolve()
      : events.write(enc.encode(evs.map((e) => JSON.stringify(e) + "\n").join("")));
  try {
    const outcome = await runOnce(opts, write);
    await writeAside(`${dir}/exit-${run}`, `${outcome.exitCode}\n`);
    return outcome;
  } finally {
    events.close();
  }
}

async function runOnce(
  opts: RunAgentOptions,
  write: (evs: AgentEvent[]) => Promise<unknown>,
): Promise<RunAgentOutcome> {
  const { dir, run, agent } = opts;
  const refuse = async (message: string, code: number): Promise<RunAgentOutcome> => {
    const result: ResultEvent = {
      type: "result",
      subtype: "error_during_execution",
      is_error: true,
      result: message,
      permission_denials: [],
    };
    await write([result]);
    return { exitCode: code, result };
  };
  const prompt = await readIfThere(`${dir}/prompt-${run}.md`);
  if (prompt === undefined) return await refuse(`no prompt-${run}.md in ${dir}`, 2);
  const recorded = run > 1 ? (await readIfThere(`${dir}/session_id`))?.trim() : undefined;
  if (agent === "pi" && run > 1 && (await piSavedSession(dir)) !== recorded) {
    // Pi would open a new session at a missing path: the run fails and opens none.
    return await refuse(`pi's session ${recorded ?? "(none)"} is not saved in ${dir}`, 2);
  }
  const req: LaunchRequest = { agent, run };
  if (opts.model !== undefined) req.model = opts.model;
  if (opts.brief !== undefined) req.brief = opts.brief;
  if (recorded) req.session = recorded;
  if (agent === "pi") req.sessionFile = piSessionFile(dir);
  if (agent === "opencode" && opts.model !== undefined && !opts.model.includes("/")) {
    const m = await opencodeConfiguredModel(opts.home ?? Deno.env.get("HOME") ?? "/");
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
    const keys = ["input_tokens", "output_tokens", "cache_read_input_tokens"] as const;
    if (base && [...keys, "cache_creation_input_tokens"].every((k) => Number.isFinite(base[k]))) {
      ctx.baseline = base as unknown as Usage;
    }
  }
  const tr = agentTranslator(agent, ctx);
  const stderrPath = `${dir}/stderr-${run}.log`;
  const stderr = await Deno.open(stderrPath, { write: true, create: true, truncate: true });
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(launch.argv[0]!, {
      args: launch.argv.slice(1),
      cwd: opts.cwd,
      env: { ...launch.env, ISX_MCP_AGENT: agent },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    stderr.close();
    return await refuse(`cannot start ${launch.argv[0]}: ${(e as Error).message}`, 127);
  }
  const pass = (sig: Deno.Signal) => () => {
    try {
      child.kill(sig);
    } catch { /* already gone */ }
  };
  const onTerm = pass("SIGTERM");
  const onInt = pass("SIGINT");
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onInt);
  try {
    const feed = (async () => {
      const w = child.stdin.getWriter();
      // an agent that exits without reading its prompt closes the pipe: not the runner's error
      await w.write(enc.encode(launch.promptPrefix + prompt)).catch(() => {});
      await w.close().catch(() => {});
    })();
    const [status] = await Promise.all([
      child.status,
      feed,
      child.stderr.pipeTo(stderr.writable),
      readEvents(child.stdout, tr, dir, agent !== "pi" && run === 1, write),
    ]);
    const code = status.signal ? 128 + signalNumber(status.signal) : status.code;
    let sessionSaved = false;
    if (agent === "pi") {
      const saved = await piSavedSession(dir);
      sessionSaved = saved !== undefined && saved === tr.sessionId;
      if (sessionSaved && run === 1) await writeAside(`${dir}/session_id`, `${saved}\n`);
    }
    if (tr instanceof CodexTranslator) {
      await writeAside(`${dir}/${CODEX_USAGE}`, JSON.stringify(tr.threadUsage) + "\n");
    }
    const final = tr.end({ code, stderrTail: await tail(stderrPath, 2000), sessionSaved });
    await write(final);
    const result = final.at(-1) as ResultEvent;
    return { exitCode: code !== 0 ? code : result.is_error ? 1 : 0, result };
  } finally {
    Deno.removeSignalListener("SIGTERM", onTerm);
    Deno.removeSignalListener("SIGINT", onInt);
  }
}

async function readEvents(
  stdout: ReadableStream<Uint8Array>,
  tr: Translator,
  dir: string,
  saveSession: boolean,
  write: (evs: AgentEvent[]) => Promise<unknown>,
): Promise<void> {
  const buf = new LineBuffer();
  const dec = new TextDecoder();
  let saved = false;
  const handle = async (lines: string[]) => {
    for (const l of lines) {
      const evs = tr.line(l);
      await write(evs);
      if (saveSession && !saved && tr.sessionId !== undefined) {
        saved = true; // the session the first event names is the task's (seed 002)
        await writeAside(`${dir}/session_id`, `${tr.sessionId}\n`);
      }
    }
  };
  for await (const chunk of stdout) await handle(buf.push(dec.decode(chunk, { stream: true })));
  await handle(buf.push(dec.decode()));
  await handle(buf.flush());
}

function signalNumber(sig: string): number {
  const table: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
  return table[sig] ?? 0;
}
