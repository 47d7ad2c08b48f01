import assert from "node:assert/strict";
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
  }, { intervalMs: 5, unref: false });
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
  // stop waits for the sweep in flight, and nothing starts after it
  let stopped = false;
  const stopping = s.stop().then(() => stopped = true);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(stopped, false, "stop waits for the sweep in flight");
  runs[2]!.resolve();
  await stopping;
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(s.count, 3);
});

Deno.test("Sweeper: a sweep that throws does not end the schedule; stop before start sweeps nothing", async () => {
  let n = 0;
  const twice = deferred();
  const s = new Sweeper(() => {
    if (++n === 2) twice.resolve();
    return Promise.reject(new Error("incusd went away"));
  }, { intervalMs: 1, unref: false });
  s.start();
  await twice.promise;
  await s.stop();
  assert.ok(n >= 2);
  const idle = new Sweeper(() => Promise.resolve(), { intervalMs: 1 });
  await idle.stop();
  idle.start();
  assert.equal(idle.count, 0);
});

Deno.test("Sweeper: stop with a bound gives up on a sweep that hangs", async () => {
  const hung = deferred();
  const s = new Sweeper(() => hung.promise);
  s.start();
  await s.stop(5);
  assert.equal(s.count, 1);
  hung.resolve();
});
