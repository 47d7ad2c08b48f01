/**
 * The per-agent dispatch: which builder and which translator serve which agent. Pure.
 *
 * @module
 */

import { claudeLaunch, ClaudeTranslator } from "./claude.ts";
import { codexLaunch, CodexTranslator } from "./codex.ts";
import type { AgentName, Translator, Usage } from "./events.ts";
import type { Launch, LaunchRequest } from "./launch.ts";
import { opencodeLaunch, OpencodeTranslator } from "./opencode.ts";
import { piLaunch, PiTranslator } from "./pi.ts";

/** The agents in default-delegate order (seed 000: Claude, Codex, Pi, opencode). */
export const AGENT_NAMES: readonly AgentName[] = ["claude", "codex", "pi", "opencode"];

/** The command line of one run of `req.agent`; TypeError on a value it cannot place. */
export function agentLaunch(req: LaunchRequest): Launch {
  switch (req.agent) {
    case "claude":
      return claudeLaunch(req);
    case "codex":
      return codexLaunch(req);
    case "pi":
      return piLaunch(req);
    case "opencode":
      return opencodeLaunch(req);
    default:
      throw new TypeError(
        `unknown agent "${String(req.agent)}": use claude, codex, pi or opencode`,
      );
  }
}

/** What a translator knows of the runs before: the session resumed, Codex's thread usage. */
export interface TranslatorContext {
  /** The session this run resumes. */
  resume?: string;
  /** Codex: the thread's usage when the previous run ended. */
  baseline?: Usage;
}

/** A fresh translator for one run of `agent`. */
export function agentTranslator(agent: AgentName, ctx: TranslatorContext = {}): Translator {
  switch (agent) {
    case "claude":
      return new ClaudeTranslator();
    case "codex":
      return new CodexTranslator(ctx.baseline);
    case "pi":
      return new PiTranslator();
    case "opencode":
      return new OpencodeTranslator(ctx.resume);
  }
}
