/**
 * `rpc/vendor/zod.js` is what scripts/vendor_zod.ts makes from the pinned zod: a zod upgrade
 * (or a hand edit of the bundle) that forgets to run the script fails here, not at a user's.
 */
import assert from "node:assert/strict";

Deno.test("rpc/vendor/zod.js, zod.d.ts and zod.LICENSE are what scripts/vendor_zod.ts makes", async () => {
  const root = new URL("..", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write=/tmp",
      "--allow-env",
      "--allow-run",
      "scripts/vendor_zod.ts",
      "--check",
    ],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
});

Deno.test("the bundled zod parses and reports as zod does", async () => {
  const { z } = await import("../rpc/vendor/zod.js");
  const schema = z.strictObject({ name: z.string(), cpus: z.number().int().optional() });
  assert.deepEqual(schema.parse({ name: "a" }), { name: "a" });
  const bad = schema.safeParse({ name: 1, extra: true });
  assert.equal(bad.success, false);
  assert.deepEqual(bad.error?.issues.map((i) => i.code).sort(), [
    "invalid_type",
    "unrecognized_keys",
  ]);
});
