/**
 * What the host makes of an agent task's files, whatever the agent: the runners write one
 * event subset (guest/agents/events.ts), so one tolerant reader serves Claude Code, Codex,
 * Pi and opencode. The tail of `events-<n>.jsonl` may start mid-line and a guest may write
 * anything there (an agent is root in its instance), so every field is re-checked and
 * unknown shapes are skipped. Also the pure choices of a delegation: which agent, the
 * prompt of the skill form, the brief. Pure.
 *
 * @module
 */

/** The agents, in `default_delegate_agent` order (seed 000). */
export const DELEGATE_AGENTS = ["claude", "codex", "pi", "opencode"] as const;

/** One of the agents. */
export type DelegateAgent = typeof DELEGATE_AGENTS[number];

/** The permission mode each agent runs with (seed 000's descriptor table). */
export const PERMISSION_MODE: Record<DelegateAgent, string> = {
  claude: "bypassPermissions",
  codex: "danger-full-access",
  pi: "full-access",
  opencode: "full-access",
};

/** The brief appended to the agent's system prompt (spec §6.A.2). */
export const DELEGATE_BRIEF =
  `You are a delegate: a coordinator on the host handed you this task and reads only your
final message. Do what the task asks, including committing, pushing or opening a pull request
when it asks for that, and take no outward action it did not ask for. When you are blocked,
stop and say so. End with a concise report: what you changed, how you verified it, and any
links you published.
`;

/** Chooses the agent: the one asked for if installed, else the first installed in order. */
export function chooseAgent(installed: readonly string[], asked?: string): DelegateAgent {
  const have = DELEGATE_AGENTS.filter((a) => installed.includes(a));
  if (asked !== undefined) {
    if (!have.includes(asked as DelegateAgent)) {
      throw new TypeError(
        `agent "${asked}" is not installed in this template (installed: ${
          have.join(", ") || "none"
        })`,
      );
    }
    return asked as DelegateAgent;
  }
  if (!have.length) {
    throw new TypeError("this template installs no delegate agent (claude, codex, pi, opencode)");
  }
  return have[0]!;
}

/** The run-1 prompt: the instruction, or `/<skill> <args>` for the skill form. */
export function delegatePrompt(
  a: { instruction?: string | undefined; skill?: string | undefined; args?: string | undefined },
): string {
  const given = (a.instruction !== undefined ? 1 : 0) + (a.skill !== undefined ? 1 : 0);
  if (given !== 1) throw new TypeError("give exactly one of instruction and skill");
  if (a.args !== undefined && a.skill === undefined) {
    throw new TypeError("args goes only with skill");
  }
  if (a.instruction !== undefined) {
    if (!a.instruction.trim()) throw new TypeError("instruction is empty");
    return a.instruction.endsWith("\n") ? a.instruction : `${a.instruction}\n`;
  }
  return `/${a.skill}${a.args ? ` ${a.args}` : ""}\n`;
}

/** Token figures as an agent reported them. */
export interface Tokens {
  /** Input tokens. */
  input_tokens: number;
  /** Output tokens. */
  output_tokens: number;
  /** Cache reads. */
  cache_read_input_tokens: number;
  /** Cache writes. */
  cache_creation_input_tokens: number;
}

/** An agent run's outcome as `task_result` reports it (spec §2.9). */
export interface AgentReport {
  /** success or error_during_execution. */
  outcome: string;
  /** True unless the run succeeded. */
  is_error: boolean;
  /** Model turns, where the agent reports them. */
  turns?: number;
  /** Cost in USD, where the agent prices its calls. */
  cost_usd?: number;
  /** Tokens, where the agent reports them. */
  tokens?: Tokens;
  /** Tools the agent was refused. */
  permission_denials: string[];
  /** The session the run used. */
  session_id?: string;
  /** The first `maxBytes` of the report. */
  report: string;
  /** The whole report's size (UTF-8 bytes). */
  report_bytes: number;
  /** True when `report` is shorter than the report. */
  truncated: boolean;
  /** Assistant messages seen in the tail. */
  assistant_messages: number;
  /** The last activities (`said: …`, `ran <tool>: …`), oldest first. */
  recent: string[];
}

const num = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined;
const oneLine = (s: string, n: number) => s.replace(/\s+/g, " ").trim().slice(0, n);

function activity(block: Record<string, unknown>): string | undefined {
  if (block.type === "text" && typeof block.text === "string" && block.text.trim()) {
    return `said: ${oneLine(block.text, 300)}`;
  }
  if (block.type === "tool_use" && typeof block.name === "string") {
    const input = (block.input && typeof block.input === "object" ? block.input : {}) as Record<
      string,
      unknown
    >;
    const what = ["command", "file_path", "path", "pattern", "url", "description"]
      .map((k) => input[k]).find((v) => typeof v === "string") as string | undefined;
    return `ran ${oneLine(block.name, 60)}${what ? `: ${oneLine(what, 200)}` : ""}`;
  }
  return undefined;
}

/** The first `max` UTF-8 bytes of `s`, cut at a character boundary. */
export function headBytes(s: string, max: number): { text: string; bytes: number; cut: boolean } {
  const b = new TextEncoder().encode(s);
  if (b.length <= max) return { text: s, bytes: b.length, cut: false };
  let end = max;
  while (end > 0 && (b[end]! & 0xc0) === 0x80) end--;
  return { text: new TextDecoder().decode(b.subarray(0, end)), bytes: b.length, cut: true };
}

/**
 * Reads an events tail: the last `result` event's figures and report (undefined when the
 * run wrote none), assistant messages and the last `recentN` activities.
 */
export function readAgentEvents(
  tail: string,
  o: { maxBytes: number; recentN?: number },
): AgentReport | undefined {
  const { recent, assistants, result } = scanAgentEvents(tail);
  if (!result) return undefined;
  return reportOf(result, recent, assistants, o);
}

/** The activities, assistant messages and last `result` event of an events tail. */
export function scanAgentEvents(
  tail: string,
): { recent: string[]; assistants: number; result?: Record<string, unknown> } {
  const recent: string[] = [];
  let assistants = 0;
  let result: Record<string, unknown> | undefined;
  for (const line of tail.split("\n")) {
    const t = line.trim();
    if (!t.startsWith("{")) continue;
    let e: unknown;
    try {
      e = JSON.parse(t);
    } catch {
      continue; // a torn first line
    }
    if (!e || typeof e !== "object" || Array.isArray(e)) continue;
    const ev = e as Record<string, unknown>;
    if (ev.type === "assistant") {
      assistants++;
      const content = (ev.message as { content?: unknown } | undefined)?.content;
      for (const b of Array.isArray(content) ? content : []) {
        const a = b && typeof b === "object" ? activity(b as Record<string, unknown>) : undefined;
        if (a) recent.push(a);
      }
    } else if (ev.type === "result") result = ev;
  }
  return { recent, assistants, ...(result ? { result } : {}) };
}

function reportOf(
  result: Record<string, unknown>,
  recent: string[],
  assistants: number,
  o: { maxBytes: number; recentN?: number },
): AgentReport {
  const text = typeof result.result === "string" ? result.result : "";
  const head = headBytes(text, o.maxBytes);
  const u = (result.usage && typeof result.usage === "object" ? result.usage : undefined) as
    | Record<string, unknown>
    | undefined;
  const tokens = u && num(u.input_tokens) !== undefined && num(u.output_tokens) !== undefined
    ? {
      input_tokens: num(u.input_tokens)!,
      output_tokens: num(u.output_tokens)!,
      cache_read_input_tokens: num(u.cache_read_input_tokens) ?? 0,
      cache_creation_input_tokens: num(u.cache_creation_input_tokens) ?? 0,
    }
    : undefined;
  const denials = Array.isArray(result.permission_denials)
    ? [
      ...new Set(
        result.permission_denials.map((d) =>
          typeof d === "string"
            ? d
            : (d && typeof d === "object" && typeof (d as { tool_name?: unknown }).tool_name ===
                  "string")
            ? (d as { tool_name: string }).tool_name
            : ""
        ).filter((d) => d),
      ),
    ]
    : [];
  const turns = num(result.num_turns);
  const cost = num(result.total_cost_usd);
  const sid = typeof result.session_id === "string" && /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(
      result.session_id,
    )
    ? result.session_id
    : undefined;
  return {
    outcome: result.subtype === "success" ? "success" : "error_during_execution",
    is_error: result.is_error !== false || result.subtype !== "success",
    ...(turns !== undefined ? { turns: Math.floor(turns) } : {}),
    ...(cost !== undefined ? { cost_usd: cost } : {}),
    ...(tokens ? { tokens } : {}),
    permission_denials: denials,
    ...(sid ? { session_id: sid } : {}),
    report: head.text,
    report_bytes: head.bytes,
    truncated: head.cut,
    assistant_messages: assistants,
    recent: recent.slice(-(o.recentN ?? 8)),
  };
}
