/**
 * The event subset every agent runner writes, whatever the agent: the Claude Code
 * `stream-json` shapes the host already reads (spec §3.5), so one host parser serves Claude
 * Code, Codex, Pi and opencode. Each agent's translator (claude.ts, codex.ts, pi.ts,
 * opencode.ts) turns its native JSONL stream into these events; everything else the agent
 * prints is dropped. Pure: lines in, events out.
 *
 * Shapes (one JSON object per line of `events-<n>.jsonl`):
 * - `{"type":"system","subtype":"init","session_id":S,"agent":A}` once the session is known;
 * - `{"type":"assistant","message":{"content":[{"type":"text","text":T}]}}`;
 * - `{"type":"assistant","message":{"content":[{"type":"tool_use","name":N,"input":{…}}]}}`;
 * - `{"type":"error","message":M}` for an error the agent reported on its way;
 * - `{"type":"result","subtype":"success"|"error_during_execution","is_error":B,"result":T,
 *   "session_id":S,"num_turns"?:n,"total_cost_usd"?:x,"usage"?:{…},"permission_denials":[…]}`
 *   last, exactly once: turns, tokens and cost only where the agent reports them.
 *
 * @module
 */

/** The agents that have a runner. */
export type AgentName = "claude" | "codex" | "pi" | "opencode";

/** Token figures as the agent reported them (Anthropic's names). */
export interface Usage {
  /** Input tokens, cache reads excluded where the agent splits them. */
  input_tokens: number;
  /** Output tokens (reasoning included where the agent counts it there). */
  output_tokens: number;
  /** Input tokens read from the prompt cache. */
  cache_read_input_tokens: number;
  /** Input tokens written to the prompt cache. */
  cache_creation_input_tokens: number;
}

/** A content block of an assistant event. */
export type Block =
  | { type: "text"; text: string }
  | { type: "tool_use"; name: string; input: Record<string, unknown> };

/** The session became known. */
export interface InitEvent {
  /** Always "system". */
  type: "system";
  /** Always "init". */
  subtype: "init";
  /** The agent's own session id (what a later run resumes). */
  session_id: string;
  /** Which agent. */
  agent: AgentName;
}

/** One piece of the agent's turn: something it said or a tool it used. */
export interface AssistantEvent {
  /** Always "assistant". */
  type: "assistant";
  /** One block per event: a text or a tool use. */
  message: { content: Block[] };
}

/** An error the agent reported while running (the run may still succeed). */
export interface ErrorEvent {
  /** Always "error". */
  type: "error";
  /** The agent's words. */
  message: string;
}

/** The run's outcome; always the last event. */
export interface ResultEvent {
  /** Always "result". */
  type: "result";
  /** The outcome. */
  subtype: "success" | "error_during_execution";
  /** True unless the run succeeded. */
  is_error: boolean;
  /** The report (the agent's final text), or why the run failed. */
  result: string;
  /** The task's session, once the agent has one (Pi: once saved). */
  session_id?: string;
  /** Model turns, where the agent reports them (not Codex). */
  num_turns?: number;
  /** Cost in USD as the agent priced it (Claude, Pi, opencode). */
  total_cost_usd?: number;
  /** Tokens, where the agent reports them. */
  usage?: Usage;
  /** Tools the agent was refused (Claude only; empty for full access). */
  permission_denials: string[];
}

/** Any event a runner writes. */
export type AgentEvent = InitEvent | AssistantEvent | ErrorEvent | ResultEvent;

/** How the agent process ended. */
export interface ExitInfo {
  /** Its exit code (128 + n when signal n killed it). */
  code: number;
  /** The end of its stderr, for a run that failed without saying why. */
  stderrTail?: string;
  /** Pi: whether its session file exists (a task has a session only once Pi saved it). */
  sessionSaved?: boolean;
}

/** Turns one agent's native JSONL into the subset; one instance per run. */
export interface Translator {
  /** Feeds one complete line of the agent's stdout; returns the events it yields. */
  line(text: string): AgentEvent[];
  /** The agent exited: returns the final events, ending with exactly one `result`. */
  end(exit: ExitInfo): AgentEvent[];
  /** The session id seen so far, if any. */
  readonly sessionId: string | undefined;
}

/** Parses one line as a JSON object; anything else (a torn line, a log line) is undefined. */
export function parseObject(text: string): Record<string, unknown> | undefined {
  const t = text.trim();
  if (!t.startsWith("{")) return undefined;
  try {
    const v: unknown = JSON.parse(t);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** True for a plain object. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A field as a string, or undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** A field as a finite non-negative number, or 0. */
export function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0;
}

/** Adds `b` into `a`. */
export function addUsage(a: Usage, b: Partial<Usage>): void {
  a.input_tokens += b.input_tokens ?? 0;
  a.output_tokens += b.output_tokens ?? 0;
  a.cache_read_input_tokens += b.cache_read_input_tokens ?? 0;
  a.cache_creation_input_tokens += b.cache_creation_input_tokens ?? 0;
}

/** A zero usage record. */
export function zeroUsage(): Usage {
  return {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  };
}

/** An assistant text event. */
export function said(text: string): AssistantEvent {
  return { type: "assistant", message: { content: [{ type: "text", text }] } };
}

/** An assistant tool-use event. */
export function used(name: string, input: unknown): AssistantEvent {
  return {
    type: "assistant",
    message: { content: [{ type: "tool_use", name, input: isObject(input) ? input : {} }] },
  };
}

/** The failure text of a run that ended without a usable result. */
export function failureText(what: string, exit: ExitInfo): string {
  const tail = exit.stderrTail?.trim();
  return `${what} (exit ${exit.code})${tail ? `: ${tail}` : ""}`;
}

/** Splits text chunks into lines (`\n` or `\r\n`); a final unterminated line comes at flush. */
export class LineBuffer {
  #pending = "";

  /** Adds a chunk; returns the lines it completed. */
  push(chunk: string): string[] {
    const parts = (this.#pending + chunk).split("\n");
    this.#pending = parts.pop()!;
    return parts.map((l) => l.endsWith("\r") ? l.slice(0, -1) : l);
  }

  /** Returns the unterminated rest, if any. */
  flush(): string[] {
    const rest = this.#pending;
    this.#pending = "";
    return rest.length > 0 ? [rest.endsWith("\r") ? rest.slice(0, -1) : rest] : [];
  }
}
