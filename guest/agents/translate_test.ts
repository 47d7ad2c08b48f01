import assert from "node:assert/strict";
import {
  type AgentEvent,
  type AgentName,
  agentTranslator,
  type ExitInfo,
  LineBuffer,
  type ResultEvent,
} from "./mod.ts";

/** Feeds `text` split at `cuts` (offsets) through a LineBuffer into a fresh translator. */
export function translate(
  agent: AgentName,
  text: string,
  exit: ExitInfo,
  opts: { cuts?: number[]; resume?: string } = {},
): AgentEvent[] {
  const tr = agentTranslator(agent, opts.resume ? { resume: opts.resume } : {});
  const buf = new LineBuffer();
  const out: AgentEvent[] = [];
  let from = 0;
  for (const cut of [...(opts.cuts ?? []), text.length]) {
    for (const l of buf.push(text.slice(from, cut))) out.push(...tr.line(l));
    from = cut;
  }
  for (const l of buf.flush()) out.push(...tr.line(l));
  out.push(...tr.end(exit));
  return out;
}

function result(evs: AgentEvent[]): ResultEvent {
  const r = evs.at(-1)!;
  assert.equal(r.type, "result");
  assert.equal(evs.filter((e) => e.type === "result").length, 1, "exactly one result");
  return r as ResultEvent;
}

const lines = (...objs: unknown[]) => objs.map((o) => JSON.stringify(o)).join("\n") + "\n";

Deno.test("LineBuffer splits at \\n and \\r\\n and keeps an unterminated tail for flush", () => {
  const b = new LineBuffer();
  assert.deepEqual(b.push("a\r\nb"), ["a"]);
  assert.deepEqual(b.push("c\n\nd"), ["bc", ""]);
  assert.deepEqual(b.flush(), ["d"]);
  assert.deepEqual(b.flush(), []);
});

Deno.test("claude: a result with is_error, or a failed exit, is an error outcome", () => {
  const text = lines(
    { type: "system", subtype: "init", session_id: "9c3f0000-0000-4000-8000-000000000001" },
    { type: "result", subtype: "success", is_error: true, result: "API Error: 500", num_turns: 1 },
  );
  const r = result(translate("claude", text, { code: 1 }));
  assert.equal(r.is_error, true);
  assert.equal(r.subtype, "error_during_execution");
  assert.equal(r.result, "API Error: 500");
  assert.equal(r.session_id, "9c3f0000-0000-4000-8000-000000000001");
  const ok = lines({ type: "result", subtype: "success", is_error: false, result: "fine" });
  assert.equal(result(translate("claude", ok, { code: 0 })).is_error, false);
  assert.equal(result(translate("claude", ok, { code: 1 })).is_error, true);
});

Deno.test("claude: no result event fails with the stderr tail", () => {
  const r = result(translate("claude", 'garbage\n{"type":', { code: 1, stderrTail: "boom\n" }));
  assert.equal(r.is_error, true);
  assert.match(r.result, /ended without a result \(exit 1\): boom/);
});

Deno.test("claude: permission denials are tool names, de-duplicated", () => {
  const text = lines({
    type: "result",
    subtype: "success",
    is_error: false,
    result: "x",
    permission_denials: [{ tool_name: "Write" }, { tool_name: "Write" }, { tool_name: "Bash" }],
  });
  assert.deepEqual(result(translate("claude", text, { code: 0 })).permission_denials, [
    "Write",
    "Bash",
  ]);
});

Deno.test("codex: turn.failed makes an error result with its message, exit code aside", () => {
  const text = lines(
    { type: "thread.started", thread_id: "01a231e6-cbff-4000-8000-000000000002" },
    { type: "turn.started" },
    { type: "error", message: "Reconnecting... 1/5" },
    { type: "turn.failed", error: { message: "stream disconnected" } },
  );
  const evs = translate("codex", text, { code: 1 });
  const r = result(evs);
  assert.equal(r.is_error, true);
  assert.equal(r.result, "stream disconnected");
  assert.equal(r.session_id, "01a231e6-cbff-4000-8000-000000000002");
  assert.equal(r.usage, undefined, "no tokens reported when no turn completed");
  assert.deepEqual(evs.filter((e) => e.type === "error").map((e) => e.message), [
    "Reconnecting... 1/5",
    "stream disconnected",
  ]);
});

Deno.test("codex: cached input moves from input_tokens to cache reads", () => {
  const text = lines(
    { type: "thread.started", thread_id: "01a231e6-cbff-4000-8000-000000000002" },
    { type: "item.completed", item: { id: "item_0", type: "agent_message", text: "hi" } },
    {
      type: "turn.completed",
      usage: { input_tokens: 100, cached_input_tokens: 30, output_tokens: 5 },
    },
  );
  const r = result(translate("codex", text, { code: 0 }));
  assert.equal(r.is_error, false);
  assert.equal(r.result, "hi");
  assert.equal(r.num_turns, undefined, "codex reports no turns");
  assert.equal(r.total_cost_usd, undefined, "codex reports no cost");
  assert.deepEqual(r.usage, {
    input_tokens: 70,
    output_tokens: 5,
    cache_read_input_tokens: 30,
    cache_creation_input_tokens: 0,
  });
});

Deno.test("pi: exit 0 with stopReason error is a failure; the session only when saved", () => {
  const text = lines(
    { type: "session", version: 3, id: "01a231e7-a8fb-7000-8000-000000000003" },
    { type: "auto_retry_end", success: false, finalError: "Connection error." },
    {
      type: "message_end",
      message: {
        role: "assistant",
        content: [],
        stopReason: "error",
        errorMessage: "Connection error.",
      },
    },
  );
  const r = result(translate("pi", text, { code: 0, sessionSaved: false }));
  assert.equal(r.is_error, true);
  assert.equal(r.result, "Connection error.");
  assert.equal(r.session_id, undefined, "an unsaved session is not the task's");
  const saved = result(translate("pi", text, { code: 0, sessionSaved: true }));
  assert.equal(saved.session_id, "01a231e7-a8fb-7000-8000-000000000003");
});

Deno.test("opencode: an error event fails the run with its message", () => {
  const text = lines(
    { type: "step_start", sessionID: "ses_dce11ced4ffeAAAA", part: { type: "step-start" } },
    {
      type: "error",
      sessionID: "ses_dce11ced4ffeAAAA",
      error: { name: "APIError", data: { message: "Overloaded" } },
    },
  );
  const r = result(translate("opencode", text, { code: 1 }));
  assert.equal(r.is_error, true);
  assert.equal(r.result, "Overloaded");
});

Deno.test("opencode: a resumed run whose events name another session fails", () => {
  const text = lines(
    { type: "step_start", sessionID: "ses_otherSession0001", part: {} },
    { type: "text", sessionID: "ses_otherSession0001", part: { type: "text", text: "hi" } },
    {
      type: "step_finish",
      sessionID: "ses_otherSession0001",
      part: { reason: "stop", tokens: { input: 1, output: 1 }, cost: 0 },
    },
  );
  const r = result(translate("opencode", text, { code: 0 }, { resume: "ses_resumedSession01" }));
  assert.equal(r.is_error, true);
  assert.match(r.result, /ran session ses_otherSession0001, not ses_resumedSession01/);
  assert.equal(r.session_id, "ses_resumedSession01", "the task keeps its own session");
});

Deno.test("opencode: a gone session (exit 1, nothing on stdout) fails with opencode's words", () => {
  const r = result(
    translate("opencode", "", { code: 1, stderrTail: "Error: Session not found\n" }, {
      resume: "ses_goneSession00001",
    }),
  );
  assert.equal(r.is_error, true);
  assert.match(r.result, /Session not found/);
});
