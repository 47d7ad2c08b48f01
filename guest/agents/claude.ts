/**
 * Claude Code: `claude -p --output-format stream-json --verbose` with
 * `--permission-mode bypassPermissions` (a headless agent cannot answer prompts; the instance
 * is the boundary), resumed with `--resume <session_id>`. Its stream already is the subset's
 * model, so the translator keeps the fields the host reads and drops the rest (thinking,
 * tool results, retries as errors). No `--max-turns`: no agent has a turn limit (seed 000).
 *
 * @module
 */

import {
  type AgentEvent,
  type ExitInfo,
  failureText,
  isObject,
  num,
  parseObject,
  type ResultEvent,
  said,
  str,
  type Translator,
  used,
} from "./events.ts";
import { checked, type Launch, type LaunchRequest, MODEL_RE, resumeOf } from "./launch.ts";

const SESSION_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The command line of one Claude Code run. */
export function claudeLaunch(req: LaunchRequest): Launch {
  const resume = resumeOf(req, SESSION_RE);
  const argv = ["claude", "-p", "--output-format", "stream-json", "--verbose"];
  // one-shot: no tool at all and no session file; a task: full access inside the instance
  if (req.oneShot) argv.push("--tools", "", "--no-session-persistence");
  else argv.push("--permission-mode", "bypassPermissions");
  if (req.model !== undefined) argv.push("--model", checked("model", req.model, MODEL_RE));
  if (req.brief) argv.push("--append-system-prompt", req.brief);
  if (resume) argv.push("--resume", resume);
  // No background calls to Anthropic's other endpoints: only model requests leave.
  return { argv, env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1" }, promptPrefix: "" };
}

/** Claude Code `stream-json` → the subset. */
export class ClaudeTranslator implements Translator {
  #session: string | undefined;
  #result: ResultEvent | undefined;

  /** The session id seen so far. */
  get sessionId(): string | undefined {
    return this.#session;
  }

  line(text: string): AgentEvent[] {
    const e = parseObject(text);
    if (!e || this.#result) return [];
    const out: AgentEvent[] = [];
    const sid = str(e.session_id);
    if (sid && !this.#session) {
      this.#session = sid;
      out.push({ type: "system", subtype: "init", session_id: sid, agent: "claude" });
    }
    if (e.type === "assistant" && isObject(e.message) && Array.isArray(e.message.content)) {
      for (const b of e.message.content) {
        if (!isObject(b)) continue;
        if (b.type === "text" && typeof b.text === "string") out.push(said(b.text));
        if (b.type === "tool_use" && typeof b.name === "string") out.push(used(b.name, b.input));
      }
    } else if (e.type === "system" && e.subtype === "api_retry") {
      const err = str(e.error) ?? (isObject(e.error) ? str(e.error.message) : undefined);
      out.push({
        type: "error",
        message: `API retry ${num(e.attempt)}/${num(e.max_retries)}${err ? `: ${err}` : ""}`,
      });
    } else if (e.type === "result") {
      const isError = e.is_error === true || (e.subtype !== undefined && e.subtype !== "success");
      const u = isObject(e.usage) ? e.usage : {};
      this.#result = {
        type: "result",
        subtype: isError ? "error_during_execution" : "success",
        is_error: isError,
        result: str(e.result) ?? (Array.isArray(e.errors) ? e.errors.join("; ") : ""),
        ...(this.#session ? { session_id: this.#session } : {}),
        ...(typeof e.num_turns === "number" ? { num_turns: num(e.num_turns) } : {}),
        ...(typeof e.total_cost_usd === "number" ? { total_cost_usd: num(e.total_cost_usd) } : {}),
        usage: {
          input_tokens: num(u.input_tokens),
          output_tokens: num(u.output_tokens),
          cache_read_input_tokens: num(u.cache_read_input_tokens),
          cache_creation_input_tokens: num(u.cache_creation_input_tokens),
        },
        permission_denials: denials(e.permission_denials),
      };
    }
    return out;
  }

  end(exit: ExitInfo): AgentEvent[] {
    const r = this.#result;
    if (!r) {
      return [{
        type: "result",
        subtype: "error_during_execution",
        is_error: true,
        result: failureText("claude ended without a result", exit),
        ...(this.#session ? { session_id: this.#session } : {}),
        permission_denials: [],
      }];
    }
    // A result that says success from a process that failed is not a success.
    if (exit.code !== 0 && !r.is_error) {
      return [{ ...r, subtype: "error_during_execution", is_error: true }];
    }
    return [r];
  }
}

function denials(v: unknown): string[] {
  if (!Array.isArray(v)) return [];
  const names = v.map((d) => isObject(d) ? str(d.tool_name) : undefined);
  return [...new Set(names.filter((n): n is string => n !== undefined))];
}
