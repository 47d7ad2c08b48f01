import assert from "node:assert/strict";
import { Session, type SessionDeps, type TaskFact } from "./session.ts";

Deno.test("Session.report tells the dashboard each transition once, with kind, agent, join command, session and client", () => {
  const facts: TaskFact[] = [];
  const s = new Session(
    { id: "7-1", reportTask: (f: TaskFact) => facts.push(f) } as unknown as SessionDeps,
  );
  s.clientName = "claude-code";
  const agent = {
    id: "t1-ab",
    instance: "i1",
    kind: "agent" as const,
    run: 1,
    state: "running" as const,
    agent: "codex",
  };
  const cmd = {
    id: "t2-ab",
    instance: "i1",
    kind: "command" as const,
    run: 1,
    state: "running" as const,
  };
  s.report(agent, "running");
  s.report(agent, "running"); // no transition: not reported again
  s.report(agent, "unknown"); // never reported
  s.report(cmd, "finished", 3);
  assert.deepEqual(facts, [
    {
      task_id: "t1-ab",
      instance: "i1",
      run: 1,
      state: "running",
      kind: "agent",
      agent: "codex",
      join: "isx shell --task t1-ab",
      session: "7-1",
      client: "claude-code",
    },
    {
      task_id: "t2-ab",
      instance: "i1",
      run: 1,
      state: "finished",
      exit_code: 3,
      kind: "command",
      session: "7-1",
      client: "claude-code",
    },
  ]);
});
