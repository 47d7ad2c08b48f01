import assert from "node:assert/strict";
import { deepMerge, mergeFiles, mountTarget } from "./_merge.ts";

Deno.test("mergeFiles merges maps key by key and replaces scalars and lists", () => {
  const a = {
    name: "a",
    services: { web: { image: "x", cpus: 8, labels: { a: "1" }, command: ["one"] } },
  };
  const b = {
    name: "b",
    services: { web: { cpus: 4, labels: { b: "2" }, command: "two three" }, db: { image: "pg" } },
  };
  assert.deepStrictEqual(mergeFiles(a, b), {
    name: "b",
    services: {
      web: { image: "x", cpus: 4, labels: { a: "1", b: "2" }, command: "two three" },
      db: { image: "pg" },
    },
  });
  assert.deepStrictEqual(a.services.web.labels, { a: "1" }, "inputs are not mutated");
});

Deno.test("mergeFiles appends ports once each", () => {
  const m = mergeFiles(
    { services: { web: { ports: ["8080:80", { target: 1, published: 2 }] } } },
    { services: { web: { ports: ["8080:80", "9090:90", { published: 2, target: 1 }] } } },
  );
  assert.deepStrictEqual((m.services as Record<string, Record<string, unknown>>).web!.ports, [
    "8080:80",
    { target: 1, published: 2 },
    "9090:90",
  ]);
});

Deno.test("mergeFiles merges volumes by target, trailing slash ignored, later wins", () => {
  const m = mergeFiles(
    { services: { web: { volumes: ["./a:/a", "./b:/b"] } } },
    {
      services: {
        web: {
          volumes: ["./c:/a/:ro", { source: "v", target: "/d" }, { source: "w", target: "/b" }],
        },
      },
    },
  );
  assert.deepStrictEqual((m.services as Record<string, Record<string, unknown>>).web!.volumes, [
    "./c:/a/:ro",
    { source: "w", target: "/b" },
    { source: "v", target: "/d" },
  ]);
});

Deno.test("mountTarget reads either syntax", () => {
  assert.equal(mountTarget("./x:/y/:ro"), "/y");
  assert.equal(mountTarget({ target: "/z/" }), "/z");
  assert.equal(mountTarget(3), undefined);
});

Deno.test("deepMerge replaces a map with a scalar and back", () => {
  assert.equal(deepMerge({ a: 1 }, "x"), "x");
  assert.deepStrictEqual(deepMerge("x", { a: 1 }), { a: 1 });
});
