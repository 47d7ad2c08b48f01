/**
 * What `exec`, `task_result` and `get_diff` share for `ask` (§2.5, §2.9, §2.11): the
 * `answer` field of their results, and the checks made before anything runs: the question's
 * bound and a summary agent in the instance's template (otherwise `invalid_argument` saying
 * what to do instead), so a refused ask never runs the command it was to summarise.
 *
 * @module
 */

import * as z from "zod";
import { once } from "./def.ts";
import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { approvedTemplate } from "../session/templates.ts";
import { checkQuestion } from "../delegate/ask_prompt.ts";
import { type AskAnswer, runAsk, type SummaryAgent } from "../delegate/ask.ts";

/** The `answer` of a result that had `ask`. */
export const Answer = once(() => z.strictObject({ text: z.string(), summarised: z.string() }));

/** An ask that passed its checks: run it over data from the instance. */
export interface PreparedAsk {
  /** Who answers. */
  who: SummaryAgent;
  /** Asks the question about `data` in the instance, saying so through `progress`. */
  answer(data: string, ctx: { signal: AbortSignal; progress(m: string): void }): Promise<AskAnswer>;
}

/** Checks `question` and the instance's summary agent; refuses `invalid_argument`. */
export function prepareAsk(
  s: Session,
  o: { tool: string; instance: string; question: string },
): PreparedAsk {
  try {
    checkQuestion(o.question);
  } catch (e) {
    if (e instanceof TypeError) {
      throw new RefusalError("invalid_argument", `${o.tool}: ${e.message}`);
    }
    throw e;
  }
  const template = s.held.get(o.instance)?.template;
  if (!template) {
    throw new RefusalError("not_found", `this session holds no instance "${o.instance}"`);
  }
  const facts = approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template);
  const who = facts.summary_agent;
  if (!who) {
    throw new RefusalError(
      "invalid_argument",
      `${o.tool}: ask needs a summary agent, and template "${template}" has none (${facts.summary_problem}); leave ask out and read the output, or use a template whose list_templates entry has supports_ask`,
    );
  }
  return {
    who,
    answer(data, { signal, progress }) {
      progress(`asking the summary agent (${who.agent}) about the output`);
      return runAsk(s, { instance: o.instance, who, question: o.question, data, signal });
    },
  };
}
