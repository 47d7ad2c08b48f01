import { deepEqual, equal, ok } from "node:assert/strict";
import { ConnectionCap, Deadline } from "./limits.ts";

Deno.test("ConnectionCap refuses past the cap per key and frees a slot once per release", () => {
  const cap = new ConnectionCap(2);
  const r1 = cap.take("a")!;
  const r2 = cap.take("a")!;
  equal(cap.take("a"), undefined);
  ok(cap.take("b"), "another key has its own slots");
  r1();
  r1(); // a second release frees nothing more
  equal(cap.open("a"), 1);
  const r3 = cap.take("a");
  ok(r3);
  equal(cap.take("a"), undefined);
  r2();
  r3!();
  equal(cap.open("a"), 0);
});

Deno.test("Deadline as a watchdog fires once after quiet and not while kicked", async () => {
  let fired = 0;
  const dog = new Deadline();
  dog.set(120, () => fired++);
  for (let i = 0; i < 6; i++) {
    await new Promise((r) => setTimeout(r, 40));
    dog.kick();
  }
  equal(fired, 0, "kicked every 40 ms for 240 ms: never quiet for 120 ms");
  await new Promise((r) => setTimeout(r, 300));
  equal(fired, 1);
  dog.stop();
  const stopped = new Deadline();
  stopped.set(20, () => fired++);
  stopped.stop();
  await new Promise((r) => setTimeout(r, 60));
  equal(fired, 1, "a stopped watchdog never fires");
});

Deno.test("Deadline fires once when due, not while kicked, and follows the deadline set last", async () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const fired: string[] = [];
  const d = new Deadline();
  d.set(120, () => fired.push("stream"));
  for (let i = 0; i < 6; i++) {
    await sleep(40);
    d.kick();
  }
  equal(fired.length, 0, "kicked every 40 ms for 240 ms: never quiet for 120 ms");
  await sleep(300);
  deepEqual(fired, ["stream"]);
  d.set(5_000, () => fired.push("keep-alive"));
  d.set(30, () => fired.push("head"));
  await sleep(120);
  deepEqual(fired, ["stream", "head"], "an earlier deadline set later replaces the first");
  d.set(30, () => fired.push("cleared"));
  d.clear();
  d.set(200, () => fired.push("later"));
  await sleep(90);
  deepEqual(fired, ["stream", "head"], "the pending 30 ms timer found 200 ms due: not yet");
  await sleep(250);
  deepEqual(fired, ["stream", "head", "later"]);
  d.set(20, () => fired.push("stopped"));
  d.stop();
  await sleep(60);
  equal(fired.length, 3, "a stopped deadline never fires");
});
