/**
 * opencode: `opencode run --format json --auto` with the prompt on stdin (positional
 * messages get quoted by opencode), resumed with `--session <id>`. The task's session is the
 * one its first event names (seed 002). A resume of a session opencode no longer has must
 * fail the run and open no other: opencode refuses it itself (exit 1), and the translator
 * also fails a run whose events name any other session than the one it resumes. The model
 * form is `provider/model`; a bare id takes the provider of opencode's configured model.
 * Turns, tokens and cost are the count and sums of `step_finish` parts.
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
import {
  briefPrefix,
  checked,
  type Launch,
  type LaunchRequest,
  MODEL_RE,
  resumeOf,
} from "./launch.ts";

const SESSION_RE = /^ses_[A-Za-z0-9]{8,64}$/;

/** `provider/model` for opencode: a bare id gets the configured model's provider. */
export function opencodeModel(model: string, configured: string | undefined): string {
  checked("model", model, MODEL_RE);
  if (model.includes("/")) return model;
  const provider = configured?.includes("/") ? configured.split("/")[0] : undefined;
  if (!provider) {
    throw new TypeError(
      `opencode needs the model as provider/model: "${model}" has no provider and opencode's config names no model to take one from`,
    );
  }
  return `${provider}/${model}`;
}

/** The command line of one opencode run. */
export function opencodeLaunch(req: LaunchRequest): Launch {
  const resume = resumeOf(req, SESSION_RE);
  // one-shot: every tool off through the inline config opencode merges over its own
  const argv = ["opencode", "run", "--format", "json", ...(req.oneShot ? [] : ["--auto"])];
  if (req.model !== undefined) {
    argv.push("--model", opencodeModel(req.model, req.configuredModel));
  }
  // a new session would otherwise cost an extra model call for its title
  if (resume) argv.push("--session", resume);
  else argv.push("--title", req.oneShot ? "isx ask" : "isx task");
  return {
    argv,
    env: {
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      ...(req.oneShot ? { OPENCODE_CONFIG_CONTENT: '{"tools":{"*":false}}' } : {}),
    },
    promptPrefix: briefPrefix(req),
  };
}

/** opencode `run --format json` → the subset. */
export class OpencodeTranslator implements Translator {
  #session: string | undefined;
  #resume: string | undefined;
  #usage = zeroUsage();
  #cost = 0;
  #steps = 0;
  #last = "";
  #error: string | undefined;

  /** `resume`: the session this run resumes; any other one fails the run. */
  constructor(resume?: string) {
    this.#resume = resume;
  }

  /** The session id of the first event. */
  get sessionId(): string | undefined {
    return this.#session;
  }

  line(text: string): AgentEvent[] {
    const e = parseObject(text);
    if (!e) return [];
    const out: AgentEvent[] = [];
    const sid = str(e.sessionID);
    if (sid && !this.#session) {
      this.#session = sid;
      out.push({ type: "system", subtype: "init", session_id: sid, agent: "opencode" });
    }
    if (sid && sid !== (this.#resume ?? this.#session) && this.#error === undefined) {
      this.#error = `opencode ran session ${sid}, not ${this.#resume ?? this.#session}`;
      out.push({ type: "error", message: this.#error });
    }
    const part = isObject(e.part) ? e.part : {};
    switch (e.type) {
      case "text": {
        const t = str(part.text);
        if (t !== undefined && t !== "") {
          this.#last = t;
          out.push(said(t));
        }
        break;
      }
      case "tool_use": {
        const state = isObject(part.state) ? part.state : {};
        out.push(used(str(part.tool) ?? "tool", state.input));
        break;
      }
      case "step_finish": {
        this.#steps++;
        const t = isObject(part.tokens) ? part.tokens : {};
        const cache = isObject(t.cache) ? t.cache : {};
        addUsage(this.#usage, {
          input_tokens: num(t.input),
          output_tokens: num(t.output) + num(t.reasoning),
          cache_read_input_tokens: num(cache.read),
          cache_creation_input_tokens: num(cache.write),
        });
        this.#cost += num(part.cost);
        break;
      }
      case "error": {
        const err = isObject(e.error) ? e.error : {};
        const data = isObject(err.data) ? err.data : {};
        const m = str(data.message) ?? str(err.name) ?? "error";
        this.#error ??= m;
        out.push({ type: "error", message: m });
        break;
      }
    }
    return out;
  }

  end(exit: ExitInfo): AgentEvent[] {
    const ok = exit.code === 0 && this.#steps > 0 && this.#error === undefined;
    const result = ok
      ? this.#last
      : this.#error ?? failureText("opencode ended without a finished step", exit);
    const session = this.#resume ?? this.#session;
    return [{
      type: "result",
      subtype: ok ? "success" : "error_during_execution",
      is_error: !ok,
      result,
      ...(session ? { session_id: session } : {}),
      ...(this.#steps > 0
        ? { num_turns: this.#steps, total_cost_usd: this.#cost, usage: { ...this.#usage } }
        : {}),
      permission_denials: [],
    }];
  }
}
