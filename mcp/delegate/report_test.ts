import assert from "node:assert/strict";
import { chooseAgent, delegatePrompt, headBytes, readAgentEvents } from "./report.ts";
import { parseFacts } from "./guest.ts";
import { modelCheckPassed } from "./preflight.ts";

const ev = (o: unknown) => JSON.stringify(o);
const RESULT = {
  type: "result",
  subtype: "success",
  is_error: false,
  result: "MOCK_DONE: wrote out.txt",
  session_id: "abc-123",
  num_turns: 2,
  total_cost_usd: 0.0123,
  usage: { input_tokens: 10, output_tokens: 4, cache_read_input_tokens: 2 },
  permission_denials: ["WebFetch", { tool_name: "WebFetch" }, { tool_name: "Bash" }, 7],
};

Deno.test("readAgentEvents: figures, report and activities from a torn tail", () => {
  const tail = [
    `":"torn line of an earlier event"}`,
    ev({ type: "system", subtype: "init", session_id: "abc-123", agent: "claude" }),
    ev({ type: "assistant", message: { content: [{ type: "text", text: "I will\nwrite it" }] } }),
    ev({
      type: "assistant",
      message: { content: [{ type: "tool_use", name: "Write", input: { file_path: "/p/o" } }] },
    }),
    "not json at all",
    ev(RESULT),
    "",
  ].join("\n");
  const r = readAgentEvents(tail, { maxBytes: 1024 })!;
  assert.equal(r.outcome, "success");
  assert.equal(r.is_error, false);
  assert.equal(r.turns, 2);
  assert.equal(r.cost_usd, 0.0123);
  assert.deepEqual(r.tokens, {
    input_tokens: 10,
    output_tokens: 4,
    cache_read_input_tokens: 2,
    cache_creation_input_tokens: 0,
  });
  assert.deepEqual(r.permission_denials, ["WebFetch", "Bash"]);
  assert.equal(r.session_id, "abc-123");
  assert.equal(r.report, RESULT.result);
  assert.equal(r.truncated, false);
  assert.equal(r.assistant_messages, 2);
  assert.deepEqual(r.recent, ["said: I will write it", "ran Write: /p/o"]);
});

Deno.test("readAgentEvents: no result is undefined; hostile fields are dropped", () => {
  assert.equal(
    readAgentEvents(ev({ type: "assistant", message: {} }) + "\n", { maxBytes: 9 }),
    undefined,
  );
  const r = readAgentEvents(
    ev({
      type: "result",
      subtype: "success",
      is_error: "no",
      result: 5,
      num_turns: -1,
      total_cost_usd: "1",
      usage: { input_tokens: "x" },
      session_id: "-rf; rm",
    }),
    { maxBytes: 9 },
  )!;
  assert.equal(r.is_error, true, "anything but is_error:false is an error");
  assert.equal(r.report, "");
  assert.equal(r.turns, undefined);
  assert.equal(r.cost_usd, undefined);
  assert.equal(r.tokens, undefined);
  assert.equal(r.session_id, undefined);
  const codex = readAgentEvents(
    ev({ ...RESULT, num_turns: undefined, total_cost_usd: undefined }),
    {
      maxBytes: 4,
    },
  )!;
  assert.equal(codex.turns, undefined);
  assert.equal(codex.cost_usd, undefined);
  assert.equal(codex.report, "MOCK");
  assert.equal(codex.truncated, true);
  assert.equal(codex.report_bytes, RESULT.result.length);
});

Deno.test("headBytes cuts at a character boundary", () => {
  assert.deepEqual(headBytes("aé", 2), { text: "a", bytes: 3, cut: true });
  assert.deepEqual(headBytes("aé", 3), { text: "aé", bytes: 3, cut: false });
});

Deno.test("chooseAgent: default order Claude, Codex, Pi, opencode; only installed ones", () => {
  assert.equal(chooseAgent(["opencode", "pi", "codex", "claude"]), "claude");
  assert.equal(chooseAgent(["opencode", "pi"]), "pi");
  assert.equal(chooseAgent(["codex", "pi"], "pi"), "pi");
  assert.throws(() => chooseAgent(["codex"], "claude"), /not installed.*codex/);
  assert.throws(() => chooseAgent(["git"]), /installs no delegate agent/);
});

Deno.test("delegatePrompt: exactly one of instruction and skill; args only with skill", () => {
  assert.equal(delegatePrompt({ instruction: "do it" }), "do it\n");
  assert.equal(delegatePrompt({ skill: "review", args: "PR 4" }), "/review PR 4\n");
  assert.throws(() => delegatePrompt({}), /exactly one/);
  assert.throws(() => delegatePrompt({ instruction: "a", skill: "b" }), /exactly one/);
  assert.throws(() => delegatePrompt({ instruction: "a", args: "b" }), /only with skill/);
  assert.throws(() => delegatePrompt({ instruction: "  " }), /empty/);
});

Deno.test("parseFacts keeps only well-formed values", () => {
  assert.deepEqual(
    parseFacts(
      "agent=codex\nsession_id=019a-thread\nmodel=gpt-5.4\ncwd=/home/agentuser/proj\ncurrent=2\n",
    ),
    {
      agent: "codex",
      session_id: "019a-thread",
      model: "gpt-5.4",
      cwd: "/home/agentuser/proj",
      run: 2,
    },
  );
  assert.deepEqual(
    parseFacts("agent=Claude\nsession_id=--resume\nmodel=-x\ncwd=/a/../etc\ncurrent=0\nx=1\n"),
    {},
  );
});

Deno.test("modelCheckPassed: only a non-error success with exit 0 passes", () => {
  const ok = JSON.stringify({ type: "result", subtype: "success", is_error: false, result: "OK" });
  assert.deepEqual(modelCheckPassed(0, `noise\n${ok}\n`), { ok: true, why: "" });
  assert.equal(modelCheckPassed(1, ok).ok, false);
  const bad = JSON.stringify({
    type: "result",
    subtype: "success",
    is_error: true,
    result: "model not found",
  });
  assert.deepEqual(modelCheckPassed(0, bad), { ok: false, why: "model not found (exit 0)" });
  assert.deepEqual(modelCheckPassed(0, "garbage"), { ok: false, why: "no answer (exit 0)" });
});
