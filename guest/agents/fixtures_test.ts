/**
 * The translators against native streams recorded from the real CLIs (Claude Code 2.1.332,
 * Codex 0.171.0, Pi 0.73.1, opencode 1.18.33) in a tpl-agents container against the mocks
 * of tests/fakes (tests/live/_record_fixtures.ts): run 1 writes a file with the agent's own
 * tool, run 2 resumes. Each stream is also cut in two at every offset and must give the same
 * events. The figures are the mocks': 1200 input, 34 output, 100 cache-read and 20
 * cache-write tokens per model call.
 */

import assert from "node:assert/strict";
import {
  type AgentEvent,
  type AgentName,
  agentTranslator,
  LineBuffer,
  type ResultEvent,
  type TranslatorContext,
} from "./mod.ts";
import { CodexTranslator } from "./codex.ts";

const DIR = new URL("./testdata/", import.meta.url).pathname;

function feed(agent: AgentName, text: string, ctx: TranslatorContext, cut?: number) {
  const tr = agentTranslator(agent, ctx);
  const buf = new LineBuffer();
  const out: AgentEvent[] = [];
  const chunks = cut === undefined ? [text] : [text.slice(0, cut), text.slice(cut)];
  for (const c of chunks) for (const l of buf.push(c)) out.push(...tr.line(l));
  for (const l of buf.flush()) out.push(...tr.line(l));
  out.push(...tr.end({ code: 0, sessionSaved: true }));
  return { out, tr };
}

function tools(evs: AgentEvent[]): string[] {
  return evs.flatMap((e) =>
    e.type === "assistant"
      ? e.message.content.flatMap((b) => b.type === "tool_use" ? [b.name] : [])
      : []
  );
}

const TOOL: Record<AgentName, string> = {
  claude: "Write",
  codex: "shell",
  pi: "write",
  opencode: "write",
};

/** Per agent, the figures of a run with `calls` model calls. */
const FIGURES: Record<AgentName, (r: ResultEvent, calls: number) => void> = {
  claude(r, calls) {
    assert.equal(r.num_turns, calls);
    assert.equal(r.usage?.output_tokens, 34 * calls);
    assert.ok((r.total_cost_usd ?? 0) > 0);
  },
  codex(r, calls) {
    assert.equal(r.num_turns, undefined);
    assert.equal(r.total_cost_usd, undefined);
    assert.deepEqual(r.usage, {
      input_tokens: 1200 * calls,
      output_tokens: 34 * calls,
      cache_read_input_tokens: 100 * calls,
      cache_creation_input_tokens: 0,
    });
  },
  pi(r, calls) {
    assert.equal(r.num_turns, calls);
    assert.deepEqual(r.usage, {
      input_tokens: 1200 * calls,
      output_tokens: 34 * calls,
      cache_read_input_tokens: 100 * calls,
      cache_creation_input_tokens: 20 * calls,
    });
    assert.ok((r.total_cost_usd ?? 0) > 0);
  },
  opencode(r, calls) {
    assert.equal(r.num_turns, calls);
    assert.deepEqual(r.usage, {
      input_tokens: 1200 * calls,
      output_tokens: 34 * calls,
      cache_read_input_tokens: 100 * calls,
      cache_creation_input_tokens: 20 * calls,
    });
    assert.ok((r.total_cost_usd ?? 0) > 0);
  },
};

for (const agent of ["claude", "codex", "pi", "opencode"] as const) {
  const one = Deno.readTextFileSync(`${DIR}/${agent}-1.jsonl`);
  const two = Deno.readTextFileSync(`${DIR}/${agent}-2.jsonl`);

  Deno.test(`${agent} translator: a recorded tool turn and its resumed turn`, () => {
    const first = feed(agent, one, {});
    const r1 = first.out.at(-1) as ResultEvent;
    assert.equal(r1.type, "result");
    assert.equal(r1.is_error, false, r1.result);
    assert.match(r1.result, /^MOCK_DONE: /);
    assert.deepEqual(tools(first.out), [TOOL[agent]]);
    const init = first.out.find((e) => e.type === "system");
    const session = first.tr.sessionId!;
    assert.ok(session, "a session id");
    if (agent !== "pi") assert.equal(init?.type === "system" && init.session_id, session);
    else assert.equal(init, undefined, "pi's session is reported only once saved");
    assert.equal(r1.session_id, session);
    FIGURES[agent](r1, 2);

    const ctx: TranslatorContext = { resume: session };
    if (first.tr instanceof CodexTranslator) ctx.baseline = first.tr.threadUsage;
    const second = feed(agent, two, ctx);
    const r2 = second.out.at(-1) as ResultEvent;
    assert.equal(r2.is_error, false, r2.result);
    assert.match(r2.result, /^MOCK_REPLY n=\d+ to: Second message: MOCK_CHECK/);
    assert.equal(r2.session_id, session, "the resumed session is the same");
    FIGURES[agent](r2, 1);
  });

  Deno.test(`${agent} translator: the recorded streams give the same events cut anywhere`, () => {
    for (const text of [one, two]) {
      const whole = JSON.stringify(feed(agent, text, {}).out);
      for (let cut = 0; cut <= text.length; cut++) {
        const got = JSON.stringify(feed(agent, text, {}, cut).out);
        if (got !== whole) assert.equal(got, whole, `cut at ${cut}`);
      }
    }
  });
}
