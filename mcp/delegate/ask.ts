/**
 * The guest edge of `ask` (spec §6.A.6 with the seed's `summary_agent`): the template's
 * summary agent answers one question about fenced, untrusted data, run one-shot inside the
 * same instance through the guest runner layer (guest/agents, `--mode ask`: tools off where
 * the agent allows, no session kept), so its model call goes through the instance's proxy
 * account like any agent's. One foreground exec as the agent user: the script makes a
 * private scratch directory, takes the prompt from stdin into `prompt-1.md`, the brief and
 * the model from the environment into files, runs the runner in an empty working
 * directory, prints the tail of the translated events and removes the directory (and any
 * left for an hour by an ask killed outright). The script's text holds only host-made values
 * (the agent name, a random directory name); question and data travel on stdin, never on a
 * command line. A run that gives no non-error answer is `unavailable`, with the agent's
 * stderr tail.
 *
 * @module
 */

import { agentRunnerArgv } from "../../guest/mod.ts";
import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { AGENT_USER, GUEST_DENO, prepareGuest, RUNNER_DIR } from "./guest.ts";
import { type DelegateAgent, readAgentEvents } from "./report.ts";
import {
  ASK_BRIEF,
  askPrompt,
  boundData,
  capAnswer,
  checkQuestion,
  fenceFor,
  NOTHING_TO_SUMMARISE,
  randomToken,
} from "./ask_prompt.ts";

/** How long the summary agent may take (the guest's `timeout`). */
export const ASK_TIMEOUT_SECONDS = 600;

/** The `answer` of a result that had `ask` (spec §2.5). */
export interface AskAnswer {
  /** The agent's answer, ≤ 16 KiB. */
  text: string;
  /** What was summarised: lines and bytes, and how much of it was read. */
  summarised: string;
}

/** Who answers: the template's summary agent and its model (none: the agent's own). */
export interface SummaryAgent {
  /** The agent. */
  agent: DelegateAgent;
  /** The model it is run with. */
  model?: string;
}

function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The scratch directory of ask `id` in the guest. */
export function askDir(id: string): string {
  return `${AGENT_USER.home}/.isx-mcp/ask/${id}`;
}

/**
 * The foreground script of ask `id` (16 hex digits; host-made values only). Its processes
 * carry `ISX_MCP_TASK=ask-<id>`, so the presence scan does not take the agent for a person's.
 */
export function askScript(id: string, agent: DelegateAgent): string {
  if (!/^[0-9a-f]{16}$/.test(id)) throw new TypeError(`invalid ask id "${id}": 16 hex digits`);
  const dir = askDir(id);
  const argv = agentRunnerArgv({
    deno: GUEST_DENO,
    scripts: RUNNER_DIR,
    dir,
    run: 1,
    agent,
    home: AGENT_USER.home,
    mode: "ask",
  }).map(shQuote).join(" ");
  return [
    ". /etc/profile >/dev/null 2>&1",
    "set -u",
    "umask 077",
    `export ISX_MCP_TASK=ask-${id}`,
    `d=${shQuote(dir)}`,
    // an ask killed outright (cancel's KILL) leaves its directory: the next one sweeps it
    `find "\${d%/*}" -mindepth 1 -maxdepth 1 -mmin +60 -exec rm -rf -- {} + 2>/dev/null`,
    `mkdir -p -- "$d/work" || exit 90`,
    `trap 'rm -rf -- "$d"' EXIT`,
    `cat >"$d/prompt-1.md" || exit 90`,
    `printf '%s\\n' "$d/work" >"$d/cwd"`,
    `printf '%s' "$ISX_ASK_BRIEF" >"$d/brief.md"`,
    `if [ -n "\${ISX_MODEL:-}" ]; then printf '%s\\n' "$ISX_MODEL" >"$d/model"; fi`,
    `unset ISX_ASK_BRIEF ISX_MODEL`,
    `${argv} >"$d/runner.log" 2>&1`,
    `rc=$?`,
    `tail -c 200000 -- "$d/events-1.jsonl" 2>/dev/null`,
    `{ tail -c 1500 -- "$d/stderr-1.log"; tail -c 500 -- "$d/runner.log"; } >&2 2>/dev/null`,
    `exit "$rc"`,
    "",
  ].join("\n");
}

/**
 * Asks `who` in `instance` the question about `data` (bounded to its last 400 KiB); empty
 * data is answered without an agent. Refuses `unavailable` when no answer comes.
 */
export async function runAsk(
  s: Session,
  o: { instance: string; who: SummaryAgent; question: string; data: string; signal: AbortSignal },
): Promise<AskAnswer> {
  const question = checkQuestion(o.question);
  const data = boundData(o.data);
  if (data.empty) return { text: NOTHING_TO_SUMMARISE, summarised: data.summarised };
  const tasks = s.deps.tasks;
  if (!tasks) throw new RefusalError("unavailable", "the task engine is not available");
  await prepareGuest(s.incus, o.instance, AGENT_USER.home);
  const prompt = askPrompt({ question, data: data.text, fence: fenceFor(data.text, question) });
  const id = randomToken().slice(0, 16);
  const r = await tasks.foreground(o.instance, {
    command: askScript(id, o.who.agent),
    env: { ISX_ASK_BRIEF: ASK_BRIEF, ...(o.who.model ? { ISX_MODEL: o.who.model } : {}) },
    cwd: AGENT_USER.home,
    stdin: prompt,
    timeoutSeconds: ASK_TIMEOUT_SECONDS,
    outputBytes: 256 * 1024,
    signal: o.signal,
  });
  const who = `the summary agent (${o.who.agent}${o.who.model ? `, model ${o.who.model}` : ""})`;
  // a cancel or timeout ends in KILL when the runner outlives TERM by 3 s, and then the
  // script's EXIT trap never runs: remove its directory from here (best effort; the next
  // ask sweeps what is an hour old)
  if (r.cancelled || r.timed_out) await removeAskDir(tasks, o.instance, id);
  if (r.cancelled) {
    throw new RefusalError("unavailable", `ask was cancelled before ${who} answered`);
  }
  if (r.timed_out) {
    throw new RefusalError(
      "unavailable",
      `${who} gave no answer within ${ASK_TIMEOUT_SECONDS} s; ask a narrower question or read the output without ask`,
    );
  }
  const rep = readAgentEvents(r.stdout, { maxBytes: 256 * 1024 });
  if (!rep || rep.is_error || r.exit_code !== 0) {
    const said = rep?.report ? `: ${rep.report.slice(0, 500)}` : "";
    throw new RefusalError(
      "unavailable",
      `${who} did not answer (exit ${r.exit_code})${said}; its stderr ends:\n${
        r.stderr.trim().slice(-1500) || "(empty)"
      }\nRead the output without ask, or ask the user to check the template's agent (isx proxy status)`,
    );
  }
  return { text: capAnswer(rep.report), summarised: data.summarised };
}

/** Removes ask `id`'s scratch directory in the guest (one exec as the agent user; never throws). */
async function removeAskDir(
  tasks: NonNullable<Session["deps"]["tasks"]>,
  instance: string,
  id: string,
): Promise<void> {
  await tasks.foreground(instance, {
    command: `rm -rf -- ${shQuote(askDir(id))}`,
    cwd: AGENT_USER.home,
    timeoutSeconds: 30,
    outputBytes: 256,
    signal: new AbortController().signal,
  }).catch(() => undefined);
}
