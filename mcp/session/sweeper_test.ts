import assert from "node:assert/strict";
import type { MarkGuard } from "./sweep.ts";
import { Sweeper } from "./sweeper.ts";

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => resolve = r);
  return { promise, resolve };
}

Deno.test("Sweeper: sweeps at start and again after each interval, never two at once", async () => {
  let active = 0, most = 0;
  const runs: ReturnType<typeof deferred>[] = [];
  const second = deferred(), third = deferred();
  const s = new Sweeper(() => {
    active++;
    most = Math.max(most, active);
    const d = deferred();
    runs.push(d);
    if (runs.length === 2) second.resolve();
    if (runs.length === 3) third.resolve();
    return d.promise.finally(() => active--);
  }, { intervalMs: 5 });
  s.start();
  s.start(); // a second start does not add a sweep
  assert.equal(s.count, 1);
  // the first sweep takes "long": many intervals pass and no second one begins
  await new Promise((r) => setTimeout(r, 40));
  assert.equal(s.count, 1);
  runs[0]!.resolve();
  await second.promise; // the next sweep comes one interval after the last ended
  assert.equal(s.count, 2);
  runs[1]!.resolve();
  await third.promise;
  assert.equal(most, 1);
  await s.stop();
  runs[2]!.resolve();
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(s.count, 3, "nothing starts after stop");
});

Deno.test("Sweeper: stop waits for a marked step in flight, not for the rest of a sweep, and refuses new steps", async () => {
  const step = deferred(), inStep = deferred(), listing = deferred();
  let guard!: MarkGuard;
  const s = new Sweeper(async (g) => {
    guard = g;
    await g(() => {
      inStep.resolve();
      return step.promise;
    });
    await listing.promise; // e.g. a list call on a stalled incusd: never ends
  });
  s.start();
  await inStep.promise;
  let stopped = false;
  const stopping = s.stop().then(() => stopped = true);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(stopped, false, "stop waits for the marked step");
  step.resolve();
  await stopping; // and not for the listing after it
  await assert.rejects(guard(() => Promise.resolve(1)), /session is ending/);
});

Deno.test("Sweeper: a bounded stop gives up on a marked step that hangs; a throwing sweep keeps the schedule", async () => {
  const hung = deferred(), inStep = deferred();
  const s = new Sweeper((g) =>
    g(() => {
      inStep.resolve();
      return hung.promise;
    })
  );
  s.start();
  await inStep.promise;
  await s.stop(5);
  hung.resolve();
  let n = 0;
  const twice = deferred();
  const t = new Sweeper(() => {
    if (++n === 2) twice.resolve();
    return Promise.reject(new Error("incusd went away"));
  }, { intervalMs: 1 });
  t.start();
  await twice.promise;
  await t.stop();
  const idle = new Sweeper(() => Promise.resolve(), { intervalMs: 1 });
  await idle.stop();
  idle.start();
  assert.equal(idle.count, 0, "stop before start sweeps nothing");
});

Deno.test("Sweeper.startAfter: the first sweep waits for the first answer, once", async () => {
  let runs = 0;
  const s = new Sweeper(() => (runs++, Promise.resolve()), { intervalMs: 60_000 });
  const ready = deferred();
  s.startAfter(ready.promise, 60_000);
  s.startAfter(Promise.resolve(), 0); // a second call changes nothing
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(runs, 0, "nothing before the first answer");
  ready.resolve();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(runs, 1);
  s.start(); // nor does a start after it
  assert.equal(s.count, 1);
  await s.stop();
});

Deno.test("Sweeper.startAfter: with no answer, the first sweep starts after the longest wait", async () => {
  let runs = 0;
  const s = new Sweeper(() => (runs++, Promise.resolve()), { intervalMs: 60_000 });
  const never = new Promise<void>(() => {});
  s.startAfter(never, 15);
  assert.equal(runs, 0);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(runs, 1, "started by the longest wait");
  await s.stop();
});

Deno.test("Sweeper.startAfter: a stop before the first sweep cancels it (and its timer)", async () => {
  let runs = 0;
  const s = new Sweeper(() => (runs++, Promise.resolve()), { intervalMs: 60_000 });
  const ready = deferred();
  s.startAfter(ready.promise, 10);
  await s.stop(); // the test's sanitizer fails on a timer left armed
  await new Promise((r) => setTimeout(r, 30));
  ready.resolve();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(runs, 0);
});
