/**
 * Pi: `pi --mode json -p` (Pi has no permission system: full access as it comes), the prompt
 * on stdin. The runner chooses the session file (`--session <file>`), which Pi creates on
 * run 1 and resumes on later runs; Pi prints the session id on its first line, but the task
 * has a session only once Pi has saved that file (seed 000), which the runner checks, so the
 * translator only reports the id it saw. Pi exits 0 even when every model call failed: the
 * outcome comes from the last assistant message's `stopReason`. Turns, tokens and cost are
 * the count and sums of the assistant messages.
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
  used,
  zeroUsage,
} from "./events.ts";
import { checked, type Launch, type LaunchRequest, MODEL_RE, resumeOf } from "./launch.ts";

const SESSION_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FILE_RE = /^\/[A-Za-z0-9._/-]{1,255}\.jsonl$/;

/** The command line of one Pi run. */
export function piLaunch(req: LaunchRequest): Launch {
  resumeOf(req, SESSION_RE);
  const argv = ["pi", "--mode", "json", "-p"];
  if (req.oneShot) argv.push("--no-session", "--no-tools");
  else if (req.sessionFile === undefined) throw new TypeError("a pi run needs its session file");
  else argv.push("--session", checked("pi session file", req.sessionFile, FILE_RE));
  if (req.model !== undefined) argv.push("--model", checked("model", req.model, MODEL_RE));
  // the system prompt is rebuilt by every run, as Claude's is: the brief goes with each
  if (req.brief) argv.push("--append-system-prompt", req.brief);
  // no version check or tool downloads from the guest; Pi trusts only Node's CA list
  // unless told to use the system store, where the instance's proxy CA is
  return {
    argv,
    env: { PI_OFFLINE: "1", PI_TELEMETRY: "0", NODE_USE_SYSTEM_CA: "1" },
    promptPrefix: "",
  };
}

/** Pi `--mode json` → the subset. */
export class PiTranslator implements Translator {
  #session: string | undefined;
  #usage = zeroUsage();
  #cost = 0;
  #turns = 0;
  #last = "";
  #stop: string | undefined;
  #error: string | undefined;

  /** The session id Pi printed (saved or not). */
  get sessionId(): string | undefined {
    return this.#session;
  }

  line(text: string): AgentEvent[] {
    const e = parseObject(text);
    if (!e) return [];
    if (e.type === "session") {
      this.#session ??= str(e.id);
      return [];
    }
    if (e.type === "auto_retry_end" && e.success === false) {
      return [{ type: "error", message: str(e.finalError) ?? "retries failed" }];
    }
    if (e.type !== "message_end" || !isObject(e.message)) return [];
    const m = e.message;
    if (m.role !== "assistant") return [];
    this.#turns++;
    const u = isObject(m.usage) ? m.usage : {};
    addUsage(this.#usage, {
      input_tokens: num(u.input),
      output_tokens: num(u.output),
      cache_read_input_tokens: num(u.cacheRead),
      cache_creation_input_tokens: num(u.cacheWrite),
    });
    if (isObject(u.cost)) this.#cost += num(u.cost.total);
    this.#stop = str(m.stopReason);
    const out: AgentEvent[] = [];
    const texts: string[] = [];
    for (const b of Array.isArray(m.content) ? m.content : []) {
      if (!isObject(b)) continue;
      if (b.type === "text" && typeof b.text === "string") {
        texts.push(b.text);
        out.push(said(b.text));
      }
      if (b.type === "toolCall" && typeof b.name === "string") out.push(used(b.name, b.arguments));
    }
    if (texts.length > 0) this.#last = texts.join("\n");
    if (this.#stop === "error" || this.#stop === "aborted") {
      this.#error = str(m.errorMessage) ?? `the model call ended with ${this.#stop}`;
      out.push({ type: "error", message: this.#error });
    } else {
      this.#error = undefined;
    }
    return out;
  }

  end(exit: ExitInfo): AgentEvent[] {
    const ok = exit.code === 0 && this.#turns > 0 && this.#error === undefined;
    const result = ok ? this.#last : this.#error ?? failureText("pi ended without an answer", exit);
    return [{
      type: "result",
      subtype: ok ? "success" : "error_during_execution",
      is_error: !ok,
      result,
      ...(this.#session && exit.sessionSaved ? { session_id: this.#session } : {}),
      ...(this.#turns > 0
        ? { num_turns: this.#turns, total_cost_usd: this.#cost, usage: { ...this.#usage } }
        : {}),
      permission_denials: [],
    }];
  }
}
