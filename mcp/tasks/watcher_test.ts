import assert from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import type { Decided } from "./state.ts";
import { type TaskChange, TaskWatcher } from "./watcher.ts";

/** A probe source answering from a script of readings, one map per call. */
function scripted(readings: Array<Record<string, Decided> | Error>) {
  const calls: string[][] = [];
  return {
    calls,
    source: {
      probeStates(_instance: string, ids: string[]): Promise<Map<string, Decided>> {
        calls.push(ids);
        const next = readings.shift();
        if (next instanceof Error) return Promise.reject(next);
        return Promise.resolve(new Map(Object.entries(next ?? {})));
      },
    },
  };
}

const FAKE_CLOCK = { now: () => 0, sleep: () => new Promise<void>(() => {}) };

function watcher(readings: Array<Record<string, Decided> | Error>) {
  const events: TaskChange[] = [];
  const s = scripted(readings);
  const w = new TaskWatcher({ source: s.source, emit: (c) => events.push(c), clock: FAKE_CLOCK });
  return { w, events, calls: s.calls };
}

Deno.test("TaskWatcher emits one event per transition and never unknown", async () => {
  const { w, events } = watcher([
    { a: { state: "unknown", run: 1 } },
    { a: { state: "running", run: 1 } },
    { a: { state: "running", run: 1 } },
    { a: { state: "unknown", run: 1 } },
    { a: { state: "finished", run: 1, exit_code: 0 } },
  ]);
  w.watch("i1", "a");
  for (let i = 0; i < 5; i++) await w.round();
  assert.deepEqual(events, [
    { task_id: "a", instance: "i1", run: 1, state: "running" },
    { task_id: "a", instance: "i1", run: 1, state: "finished", exit_code: 0 },
  ]);
});

Deno.test("TaskWatcher drops stale readings: an older run, running after finished", () => {
  const { w, events } = watcher([]);
  w.report("i1", "a", { state: "running", run: 2 });
  w.report("i1", "a", { state: "finished", run: 1, exit_code: 1 });
  w.report("i1", "a", { state: "finished", run: 2, exit_code: 0 });
  w.report("i1", "a", { state: "running", run: 2 });
  w.report("i1", "a", { state: "running", run: 3 });
  assert.deepEqual(events.map((e) => `${e.run}:${e.state}`), [
    "2:running",
    "2:finished",
    "3:running",
  ]);
});

Deno.test("TaskWatcher probes only running or unreported tasks, one call per instance", async () => {
  const { w, calls } = watcher([{}, {}]);
  w.watch("i1", "a");
  w.watch("i1", "b");
  w.report("i1", "b", { state: "finished", run: 1, exit_code: 0 });
  w.watch("i2", "c");
  await w.round();
  assert.deepEqual(calls.sort(), [["a"], ["c"]]);
});

Deno.test("TaskWatcher makes a gone instance's running tasks lost, and skips other failures", async () => {
  const { w, events } = watcher([
    new IsbError("api", "incusd is busy"),
    new IsbError("not_found", "instance not found"),
  ]);
  w.report("i1", "a", { state: "running", run: 1 });
  await w.round();
  assert.equal(events.length, 1);
  await w.round();
  assert.deepEqual(events.at(-1), { task_id: "a", instance: "i1", run: 1, state: "lost" });
  assert.deepEqual([...w.pending()], []);
});

Deno.test("TaskWatcher release is final until revive; revive keeps the run floor", () => {
  const { w, events } = watcher([]);
  w.report("i1", "a", { state: "running", run: 2 });
  w.release("i1");
  w.release("i1");
  w.report("i1", "a", { state: "finished", run: 2, exit_code: 0 });
  assert.deepEqual(events.map((e) => e.state), ["running", "released"]);
  w.revive("i1", "a");
  w.report("i1", "a", { state: "running", run: 1 });
  w.report("i1", "a", { state: "finished", run: 2, exit_code: 0 });
  assert.deepEqual(events.map((e) => e.state), ["running", "released", "finished"]);
});

Deno.test("TaskWatcher stop ends the loop without leaving a timer", async () => {
  const { w } = watcher([{}, {}, {}]);
  const events: TaskChange[] = [];
  const real = new TaskWatcher({
    source: { probeStates: () => Promise.resolve(new Map()) },
    emit: (c) => events.push(c),
  });
  real.watch("i1", "a");
  real.start();
  await real.stop();
  w.start();
  await w.stop();
  assert.deepEqual(events, []);
});

Deno.test("TaskWatcher slow rounds: a person joining and leaving reads attached then finished", async () => {
  const events: TaskChange[] = [];
  const calls: string[] = [];
  // the presence readings of the slow rounds (rounds 1, 6, 11, 16); quick rounds probe only
  // what is still running
  const slow = [
    { state: "finished" as const, run: 1, exit_code: 0 },
    { state: "attached" as const, run: 1, exit_code: 0, attached_pid: 4242 },
    { state: "attached" as const, run: 1, exit_code: 0, attached_pid: 4242 },
    { state: "finished" as const, run: 1, exit_code: 0 },
  ];
  const w = new TaskWatcher({
    source: {
      probeStates(_i, ids) {
        calls.push(`quick ${ids.join(",")}`);
        return Promise.resolve(new Map());
      },
      probePresence(_i, ids) {
        calls.push(`slow ${ids.join(",")}`);
        return Promise.resolve(new Map(ids.map((id) => [id, slow.shift()!])));
      },
    },
    emit: (c) => events.push(c),
    clock: FAKE_CLOCK,
  });
  w.watch("i1", "a", 1, { agent: true });
  w.watch("i1", "c", 1, { state: "finished" }); // a finished command: never probed again
  for (let i = 0; i < 16; i++) await w.round();
  assert.deepEqual(events.map((e) => `${e.run}:${e.state}:${e.exit_code ?? "-"}`), [
    "1:finished:0",
    "1:attached:-",
    "1:finished:0",
  ]);
  assert.deepEqual(
    calls,
    ["slow a", "slow a", "slow a", "slow a"],
    "nothing runs: quick rounds probe nothing",
  );
});
