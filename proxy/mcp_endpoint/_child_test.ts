import assert from "node:assert/strict";
import { spawnChild } from "./_child.ts";

Deno.test("spawnChild relays JSON lines both ways, in a clean environment", async () => {
  const got: Record<string, unknown>[] = [];
  // a variable of this process must not reach the child
  Deno.env.set("ISX_CHILD_PROBE", "leaked");
  const child = spawnChild(
    {
      command: "/usr/bin/bash",
      // echoes each line back with the environment it sees
      args: () => [
        "-c",
        'while IFS= read -r l; do printf \'{"got":%s,"home":"%s","probe":"%s"}\\n\' "$l" "$HOME" "${ISX_CHILD_PROBE-unset}"; done',
      ],
      env: { HOME: "/nowhere" },
    },
    "coord",
    (m) => got.push(m),
  );
  await child.send({ a: 1 });
  const deadline = Date.now() + 10_000;
  while (!got.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  Deno.env.delete("ISX_CHILD_PROBE");
  assert.deepEqual(got[0], { got: { a: 1 }, home: "/nowhere", probe: "unset" });
  await child.stop(5_000);
});

Deno.test("spawnChild's stop sends TERM, then KILL after the grace to a child that ignores TERM", async () => {
  const child = spawnChild(
    {
      command: "/usr/bin/bash",
      args: () => ["-c", 'trap "" TERM; while :; do sleep 0.05; done'],
      env: {},
    },
    "coord",
    () => {},
  );
  await new Promise((r) => setTimeout(r, 200));
  const t0 = Date.now();
  await child.stop(500);
  const ms = Date.now() - t0;
  assert.ok(ms >= 450, `ended after ${ms} ms: before the grace`);
  await assert.rejects(() => child.send({ x: 1 }));
});

Deno.test("spawnChild passes the bare name and the project to the spec", () => {
  const seen: unknown[] = [];
  const child = spawnChild(
    {
      command: "/usr/bin/true",
      args: (name, project) => (seen.push([name, project]), []),
      env: {},
    },
    "proj/coord",
    () => {},
  );
  assert.deepEqual(seen, [["coord", "proj"]]);
  return child.stop(1000);
});
