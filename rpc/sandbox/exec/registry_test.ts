import assert from "node:assert/strict";
import { type ExecControl, execKey, ExecRegistry } from "./registry.ts";

/** A control that records calls and takes a tick per call, so ordering bugs show. */
function recorder(log: string[]): ExecControl {
  const tick = (s: string) => new Promise<void>((r) => setTimeout(() => r(void log.push(s)), 1));
  return {
    write: (d) => tick(`write ${new TextDecoder().decode(d)}`),
    closeStdin: () => tick("close"),
    signal: (n) => tick(`signal ${n}`),
    resize: (w, h) => tick(`resize ${w}x${h}`),
  };
}

const w = (s: string) => (c: ExecControl) => c.write(new TextEncoder().encode(s));

Deno.test("ExecRegistry queues calls while pending and keeps later calls behind the replay", async () => {
  const reg = new ExecRegistry();
  const slot = reg.register("2");
  await reg.control("2", w("a"));
  await reg.control("2", w("b"));
  const log: string[] = [];
  slot.start(recorder(log));
  await reg.control("2", w("c")); // arrives during the replay: runs after it
  assert.deepEqual(log, ["write a", "write b", "write c"]);
});

Deno.test("ExecRegistry drops replay failures silently", async () => {
  const reg = new ExecRegistry();
  const slot = reg.register("1");
  await reg.control("1", () => Promise.reject(new Error("boom")));
  const log: string[] = [];
  slot.start(recorder(log));
  await reg.control("1", (c) => c.signal(15));
  assert.deepEqual(log, ["signal 15"]);
});

Deno.test("ExecRegistry answers not_found for unknown and finished execs", async () => {
  const reg = new ExecRegistry();
  await assert.rejects(reg.control("7", w("x")), {
    code: "not_found",
    message: "running exec 7 not found",
  });
  const slot = reg.register("7");
  slot.start(recorder([]));
  slot.finish();
  assert.equal(reg.size, 0);
  await assert.rejects(reg.control("7", w("x")), { code: "not_found" });
});

Deno.test("ExecRegistry keeps a newer exec with the same id when the older one finishes", () => {
  const reg = new ExecRegistry();
  const old = reg.register("5");
  const young = reg.register("5");
  old.finish();
  assert.equal(reg.claim("5"), young);
});

Deno.test("execKey renders a string as itself and anything else as JSON", () => {
  const cases: [unknown, string][] = [
    ["a", "a"],
    [2, "2"],
    [1.5, "1.5"],
    [null, "null"],
    [
      true,
      "true",
    ],
    [{ a: 1 }, '{"a":1}'],
    ["2", "2"],
  ];
  for (const [id, key] of cases) assert.equal(execKey(id), key);
});
