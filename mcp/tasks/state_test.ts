import assert from "node:assert/strict";
import { type Decided, decideState, probeWord, type TaskFacts } from "./state.ts";

const CASES: Array<[string, TaskFacts, Decided]> = [
  ["no directory", { run: "missing" }, { state: "lost", run: 0 }],
  ["no current", { run: 0 }, { state: "lost", run: 0 }],
  ["an exit file", { run: 2, exit: 7 }, { state: "finished", run: 2, exit_code: 7 }],
  ["an unreadable exit file", { run: 1, exit: "invalid" }, { state: "finished", run: 1 }],
  ["exit wins over an active unit", { run: 1, exit: 0, unit: "active" }, {
    state: "finished",
    run: 1,
    exit_code: 0,
  }],
  ["an active unit", { run: 1, unit: "active" }, { state: "running", run: 1 }],
  ["an activating unit", { run: 1, unit: "activating" }, { state: "running", run: 1 }],
  ["no answer from systemd", { run: 1, unit: "" }, { state: "unknown", run: 1 }],
  ["no answer at all", { run: 1 }, { state: "unknown", run: 1 }],
  ["a fresh cancel stamp", { run: 1, unit: "inactive", cancelAge: 3 }, {
    state: "running",
    run: 1,
  }],
  ["a cancel stamp at 299 s", { run: 1, unit: "failed", cancelAge: 299 }, {
    state: "running",
    run: 1,
  }],
  ["a stale cancel stamp", { run: 1, unit: "inactive", cancelAge: 300 }, { state: "lost", run: 1 }],
  ["a cancel stamp from the future", { run: 1, unit: "inactive", cancelAge: -5 }, {
    state: "lost",
    run: 1,
  }],
  ["an exit written while asking", { run: 3, unit: "inactive", exitAgain: 0 }, {
    state: "finished",
    run: 3,
    exit_code: 0,
  }],
  ["an inactive unit without exit", { run: 1, unit: "inactive" }, { state: "lost", run: 1 }],
  ["a deactivating unit without stamp", { run: 1, unit: "deactivating" }, {
    state: "lost",
    run: 1,
  }],
];

for (const [name, facts, want] of CASES) {
  Deno.test(`decideState of ${name} is ${want.state}`, () => {
    assert.deepEqual(decideState(facts), want);
  });
}

Deno.test("probeWord keeps only running tasks running and unknown unknown", () => {
  assert.equal(probeWord({ state: "running", run: 1 }), "running");
  assert.equal(probeWord({ state: "unknown", run: 1 }), "unknown");
  assert.equal(probeWord({ state: "finished", run: 1, exit_code: 0 }), "done");
  assert.equal(probeWord({ state: "lost", run: 0 }), "done");
});
