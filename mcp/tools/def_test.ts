import assert from "node:assert/strict";
import * as z from "zod";
import { once, tool } from "./def.ts";

Deno.test("tool: each schema is built on its first read, then the same one; the rest is as given", async () => {
  const built: string[] = [];
  const t = tool({
    name: "t",
    description: "d",
    input: () => (built.push("input"), z.strictObject({ a: z.string() })),
    output: () => (built.push("output"), z.strictObject({ b: z.number() })),
    hints: { readOnly: true, idempotent: true },
    run: (args) => Promise.resolve({ structured: { b: args.a.length } }),
  });
  assert.deepEqual(built, [], "declaring builds nothing");
  assert.equal(t.name, "t");
  const input = t.input;
  assert.equal(t.input, input);
  assert.deepEqual(built, ["input"]);
  assert.equal(input.safeParse({ a: "x", extra: 1 }).success, false, "still strict");
  assert.equal(t.output, t.output);
  assert.deepEqual(built, ["input", "output"]);
  assert.deepEqual(await t.run({ a: "xyz" }, {} as never), { structured: { b: 3 } });
  let n = 0;
  const shared = once(() => ++n);
  assert.equal(shared(), 1);
  assert.equal(shared(), 1);
});
