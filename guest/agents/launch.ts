/**
 * What every agent's command-line builder takes and gives, and the checks on the values that
 * end up in an argv. Nothing here reaches a shell (the runner spawns the argv directly), but
 * a value starting with `-` would still be read as an option by the agent's own parser, so
 * models and session ids are checked against tight patterns before they are placed. Pure.
 *
 * @module
 */

import type { AgentName } from "./events.ts";

/** One run of an agent, as the host asked for it. */
export interface LaunchRequest {
  /** Which agent. */
  agent: AgentName;
  /** The run number: 1 starts a session, n > 1 resumes `session`. */
  run: number;
  /** The model override, if one was chosen (`provider/model` or a bare id for opencode). */
  model?: string;
  /** The session to resume (required for run > 1): the id the agent reported. */
  session?: string;
  /** Text for the agent's system prompt, or the head of run 1's prompt where it has none. */
  brief?: string;
  /** Pi only: the session file the runner chose for this task (created by run 1). */
  sessionFile?: string;
  /** opencode only: the model of its config (`provider/model`), for a bare model id. */
  configuredModel?: string;
  /** A one-shot answer (`ask`): run 1 only, tools off where the agent allows, no session kept. */
  oneShot?: boolean;
}

/** The process to spawn: prompt on stdin, stdout is the agent's native JSONL. */
export interface Launch {
  /** Program first; spawned without a shell. */
  argv: string[];
  /** Variables set for this agent on top of the run's environment. */
  env: Record<string, string>;
  /** Text put before the prompt on stdin (the brief, for agents without a system prompt). */
  promptPrefix: string;
}

/** A model id: letters, digits and `._:/@-`, not starting with `-` or `/`. */
export const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/** Refuses a value that may not be placed in an argv; returns it otherwise. */
export function checked(what: string, value: string, re: RegExp): string {
  if (!re.test(value)) {
    throw new TypeError(`invalid ${what} "${value.slice(0, 80)}": it must match ${re.source}`);
  }
  return value;
}

/** The session to resume, checked; undefined for run 1. */
export function resumeOf(req: LaunchRequest, re: RegExp): string | undefined {
  if (!Number.isInteger(req.run) || req.run < 1) {
    throw new TypeError(`invalid run number ${req.run}: runs count from 1`);
  }
  if (req.oneShot && req.run !== 1) {
    throw new TypeError(`a one-shot ${req.agent} run is run 1: it resumes nothing`);
  }
  if (req.run === 1) return undefined;
  if (req.session === undefined) {
    throw new TypeError(`run ${req.run} of ${req.agent} needs the session of run 1 to resume`);
  }
  return checked(`${req.agent} session id`, req.session, re);
}

/** The brief as a prompt head (run 1 only), for agents with no system-prompt option. */
export function briefPrefix(req: LaunchRequest): string {
  return req.run === 1 && req.brief ? `${req.brief.trimEnd()}\n\n---\n\n` : "";
}
