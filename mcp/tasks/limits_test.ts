import assert from "node:assert/strict";
import { BusyElsewhere, PROBE_COOLDOWN_MS, TaskSlots } from "./limits.ts";
import type { TaskListing } from "./parse.ts";

const task = (id: string, state: TaskListing["state"]): TaskListing => ({
  task_id: id,
  state,
  run: 1,
});

Deno.test("TaskSlots lets only one of two racing reservations take the last slot", async () => {
  const slots = new TaskSlots();
  const counts = async () => {
    await new Promise((r) => setTimeout(r, 5)); // a probe in flight while the other waits
    return { mine: 1, elsewhere: new Map([["other", 1]]) };
  };
  const [a, b] = await Promise.all([slots.reserve(3, counts), slots.reserve(3, counts)]);
  assert.equal(a.ok, true);
  assert.equal(b.ok, false);
  if (!b.ok) {
    assert.equal(b.message.startsWith("3 of max_concurrent_tasks 3 are busy"), true, b.message);
    assert.match(b.message, /1 running in this session, 1 launching, 1 elsewhere: other \(1\)/);
  }
  if (a.ok) a.reservation.release();
  assert.equal(slots.launching, 0);
  const c = await slots.reserve(3, counts);
  assert.equal(c.ok, true);
  if (c.ok) {
    c.reservation.release();
    c.reservation.release(); // twice frees once
  }
  assert.equal(slots.launching, 0);
});

Deno.test("TaskSlots keeps serving after a count that failed", async () => {
  const slots = new TaskSlots();
  await assert.rejects(slots.reserve(1, () => Promise.reject(new Error("boom"))), /boom/);
  const r = await slots.reserve(1, () => Promise.resolve({ mine: 0, elsewhere: new Map() }));
  assert.equal(r.ok, true);
});

Deno.test("BusyElsewhere counts running and unknown once, cools down failing and slow instances", async () => {
  let now = 0;
  const clock = { now: () => now, sleep: () => Promise.resolve() };
  const asked: string[] = [];
  const b = new BusyElsewhere((i) => {
    asked.push(i);
    if (i === "bad") return Promise.reject(new Error("no answer"));
    if (i === "slow") {
      now += 6000;
      return Promise.resolve([task("s1", "running")]);
    }
    return Promise.resolve([
      task("a", "running"),
      task("b", "unknown"),
      task("c", "finished"),
      task("d", "lost"),
    ]);
  }, clock);
  const first = await b.count(["ok", "bad"]);
  assert.deepEqual([...first], [["ok", 2], ["bad", 0]]);
  assert.deepEqual([...await b.count(["slow"])], [["slow", 1]]); // counted, then cooled down
  asked.length = 0;
  const again = await b.count(["ok", "bad", "slow"]);
  assert.deepEqual(asked, ["ok"]);
  assert.deepEqual([...again], [["ok", 2], ["bad", 0], ["slow", 0]]);
  now += PROBE_COOLDOWN_MS + 1;
  asked.length = 0;
  await b.count(["bad"]);
  assert.deepEqual(asked, ["bad"]);
});

Deno.test("BusyElsewhere never has two probes of one instance in flight", async () => {
  let calls = 0;
  let release = () => {};
  const b = new BusyElsewhere(() => {
    calls++;
    return new Promise((r) => release = () => r([task("x", "running")]));
  });
  const p = Promise.all([b.count(["i"]), b.count(["i"])]);
  release();
  const [x, y] = await p;
  assert.equal(calls, 1);
  assert.deepEqual([x.get("i"), y.get("i")], [1, 1]);
});

Deno.test("BusyElsewhere counts 0 for an instance that does not answer in 10 s, then cools it", async () => {
  let slept = 0;
  const clock = {
    now: () => 0,
    sleep: (ms: number) => {
      slept = ms;
      return Promise.resolve();
    },
  };
  let asked = 0;
  const b = new BusyElsewhere(() => {
    asked++;
    return new Promise<TaskListing[]>(() => {}); // never answers
  }, clock);
  assert.deepEqual([...await b.count(["mute"])], [["mute", 0]]);
  assert.equal(slept, 10_000);
  await b.count(["mute"]);
  assert.equal(asked, 1);
});
