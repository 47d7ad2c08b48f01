/**
 * Codex: `codex exec --json` in `danger-full-access` with approval policy `never` (full
 * access inside the instance; seed 000), the prompt on stdin (`-`), resumed with
 * `codex exec resume <thread_id>`. Its session is the `thread_id` of the first event. Codex
 * reports tokens (`turn.completed.usage`) but neither turns nor cost, so the result has
 * `usage` only. That usage is the thread's total so far (a resumed run's includes the earlier
 * runs'), so the translator subtracts the total the previous run ended with. OpenAI counts
 * cached input inside `input_tokens`; the subset uses Anthropic's split, so cached tokens
 * move to `cache_read_input_tokens`.
 *
 * @module
 */

import {
  addUsage,
  type AgentEvent,
  type ExitInfo,
  failureText,
  isObject,
  num,
  parseObject,
  said,
  str,
  type Translator,
  type Usage,
  used,
  zeroUsage,
} from "./events.ts";
import {
  briefPrefix,
  checked,
  type Launch,
  type LaunchRequest,
  MODEL_RE,
  resumeOf,
} from "./launch.ts";

const THREAD_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The command line of one Codex run. */
export function codexLaunch(req: LaunchRequest): Launch {
  const resume = resumeOf(req, THREAD_RE);
  const argv = ["codex", "exec"];
  if (resume) argv.push("resume");
  argv.push(
    "--json",
    "--skip-git-repo-check",
    // a task: full access inside the instance, as the descriptors name it; one-shot: Codex's
    // shell cannot be turned off, so its sandbox is read-only and nothing of it is kept
    "-c",
    req.oneShot ? 'sandbox_mode="read-only"' : 'sandbox_mode="danger-full-access"',
    ...(req.oneShot ? ["--ephemeral"] : []),
    "-c",
    'approval_policy="never"',
    "-c",
    "check_for_update_on_startup=false",
    // a lost connection fails the turn instead of retrying for ever
    "-c",
    "features.unbounded_connection_retries=false",
  );
  if (req.model !== undefined) argv.push("-m", checked("model", req.model, MODEL_RE));
  if (resume) argv.push(resume);
  argv.push("-");
  return { argv, env: {}, promptPrefix: briefPrefix(req) };
}

/** Codex `exec --json` → the subset. */
export class CodexTranslator implements Translator {
  #session: string | undefined;
  #usage = zeroUsage();
  #baseline: Usage;
  #turns = 0;
  #failed: string | undefined;
  #last = "";
  #started = new Set<string>();

  /** `baseline`: the thread's usage when the previous run ended (run 1: none). */
  constructor(baseline?: Usage) {
    this.#baseline = baseline ?? zeroUsage();
  }

  /** The thread's total usage as Codex last reported it (what the next run subtracts). */
  get threadUsage(): Usage {
    return { ...this.#usage };
  }

  /** The session (thread) id seen so far. */
  get sessionId(): string | undefined {
    return this.#session;
  }

  line(text: string): AgentEvent[] {
    const e = parseObject(text);
    if (!e) return [];
    switch (e.type) {
      case "thread.started": {
        const id = str(e.thread_id);
        if (!id || this.#session) return [];
        this.#session = id;
        return [{ type: "system", subtype: "init", session_id: id, agent: "codex" }];
      }
      case "item.started":
      case "item.completed":
        return this.#item(e.type, e.item);
      case "turn.completed": {
        this.#turns++;
        const u = isObject(e.usage) ? e.usage : {};
        const cached = num(u.cached_input_tokens);
        this.#usage = zeroUsage(); // a running total: the last report replaces the others
        addUsage(this.#usage, {
          input_tokens: Math.max(0, num(u.input_tokens) - cached),
          output_tokens: num(u.output_tokens),
          cache_read_input_tokens: cached,
          cache_creation_input_tokens: num(u.cache_write_input_tokens),
        });
        return [];
      }
      case "turn.failed": {
        const m = isObject(e.error) ? str(e.error.message) : undefined;
        this.#failed = m ?? "the turn failed";
        return [{ type: "error", message: this.#failed }];
      }
      case "error":
        return [{ type: "error", message: str(e.message) ?? "error" }];
      default:
        return [];
    }
  }

  #item(kind: string, item: unknown): AgentEvent[] {
    if (!isObject(item)) return [];
    const id = str(item.id) ?? "";
    const first = !this.#started.has(id);
    if (kind === "item.started") this.#started.add(id);
    switch (item.type) {
      case "agent_message": {
        const t = str(item.text);
        if (kind !== "item.completed" || t === undefined) return [];
        this.#last = t;
        return [said(t)];
      }
      case "command_execution":
        return first ? [used("shell", { command: str(item.command) ?? "" })] : [];
      case "file_change": {
        if (!first) return [];
        const changes = Array.isArray(item.changes) ? item.changes.filter(isObject) : [];
        return [used("apply_patch", {
          file_path: str(changes[0]?.path) ?? "",
          changes: changes.map((c) => ({ path: str(c.path), kind: str(c.kind) })),
        })];
      }
      case "mcp_tool_call":
        return first ? [used(str(item.tool) ?? "mcp", item.arguments)] : [];
      case "web_search":
        return first ? [used("web_search", { query: str(item.query) ?? "" })] : [];
      case "error":
        return kind === "item.completed"
          ? [{ type: "error", message: str(item.message) ?? "error" }]
          : [];
      default:
        return [];
    }
  }

  end(exit: ExitInfo): AgentEvent[] {
    const ok = exit.code === 0 && this.#failed === undefined && this.#turns > 0;
    const result = ok
      ? this.#last
      : this.#failed ?? failureText("codex ended without a completed turn", exit);
    return [{
      type: "result",
      subtype: ok ? "success" : "error_during_execution",
      is_error: !ok,
      result,
      ...(this.#session ? { session_id: this.#session } : {}),
      ...(this.#turns > 0 ? { usage: minus(this.#usage, this.#baseline) } : {}),
      permission_denials: [],
    }];
  }
}

function minus(a: Usage, b: Usage): Usage {
  return {
    input_tokens: Math.max(0, a.input_tokens - b.input_tokens),
    output_tokens: Math.max(0, a.output_tokens - b.output_tokens),
    cache_read_input_tokens: Math.max(0, a.cache_read_input_tokens - b.cache_read_input_tokens),
    cache_creation_input_tokens: Math.max(
      0,
      a.cache_creation_input_tokens - b.cache_creation_input_tokens,
    ),
  };
}
