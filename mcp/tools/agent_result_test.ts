import assert from "node:assert/strict";
import { agentStatus } from "./agent_result.ts";
import type { TaskEntry } from "../session/mod.ts";

const T: TaskEntry = {
  id: "t1-abcd",
  instance: "i",
  kind: "agent",
  run: 1,
  state: "running",
  agent: "pi",
};
const base = {
  task_id: "t1-abcd",
  instance: "i",
  kind: "agent",
  run: 1,
  stdout_bytes: 10,
  stderr_bytes: 5,
  stderr_tail: "boom",
};
const line = (o: unknown) => JSON.stringify(o);

Deno.test("agentStatus: activities and cost instead of the raw events tail", () => {
  const tail = [
    line({ type: "assistant", message: { content: [{ type: "text", text: "hi" }] } }),
    line({ type: "result", subtype: "success", is_error: false, result: "r", total_cost_usd: 0.5 }),
  ].join("\n");
  const st = agentStatus(T, { ...base, state: "finished", exit_code: 0, stdout_tail: tail });
  assert.deepEqual(st, {
    task_id: "t1-abcd",
    instance: "i",
    kind: "agent",
    run: 1,
    state: "finished",
    exit_code: 0,
    agent: "pi",
    assistant_messages: 1,
    recent: ["said: hi"],
    cost_usd: 0.5,
  });
});

Deno.test("agentStatus: the stderr tail only when the run ended without a result", () => {
  const running = agentStatus(T, { ...base, state: "running", stdout_tail: "" });
  assert.equal(running.agent_stderr, undefined);
  const failed = agentStatus(T, { ...base, state: "finished", exit_code: 1, stdout_tail: "" });
  assert.equal(failed.agent_stderr, "boom");
  assert.equal(failed.cost_usd, undefined);
  assert.equal(agentStatus(T, { ...base, state: "lost", stdout_tail: "" }).agent_stderr, "boom");
});
