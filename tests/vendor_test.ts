/**
 * `rpc/vendor/*.js` are what scripts/vendor.ts makes from the pinned packages: an upgrade (or a
 * hand edit of a bundle) that forgets to run the script fails here, not at a user's.
 */
import assert from "node:assert/strict";

Deno.test("rpc/vendor/ holds what scripts/vendor.ts makes (zod and js-yaml: bundle, types, licence)", async () => {
  const root = new URL("..", import.meta.url).pathname;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-read",
      "--allow-write=/tmp",
      "--allow-env",
      "--allow-run",
      "scripts/vendor.ts",
      "--check",
    ],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
});

Deno.test("the bundled zod parses and reports as zod does", async () => {
  const z = await import("../rpc/vendor/zod.js");
  const schema = z.strictObject({ name: z.string(), cpus: z.number().int().optional() });
  assert.deepEqual(schema.parse({ name: "a" }), { name: "a" });
  const bad = schema.safeParse({ name: 1, extra: true });
  assert.equal(bad.success, false);
  assert.deepEqual(bad.error?.issues.map((i) => i.code).sort(), [
    "invalid_type",
    "unrecognized_keys",
  ]);
});

Deno.test("the bundled js-yaml reads and refuses as js-yaml does", async () => {
  const { CORE_SCHEMA, load, loadAll, mergeTag, YAMLException } = await import(
    "../rpc/vendor/js_yaml.js"
  );
  assert.deepEqual(load("a: [1, x]\nb: {c: null}"), { a: [1, "x"], b: { c: null } });
  const merged = loadAll("x: &d {a: 1}\ny: {<<: *d, b: 2}", {
    schema: CORE_SCHEMA.withTags(mergeTag),
  });
  assert.deepEqual(merged, [{ x: { a: 1 }, y: { a: 1, b: 2 } }]);
  assert.throws(() => load("a: 1\na: 2"), YAMLException);
});
