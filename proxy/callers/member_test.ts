import assert from "node:assert/strict";
import type { IncusLike } from "./clients.ts";
import { memberOnly } from "./member.ts";

function fake(seen: unknown[]): IncusLike {
  return {
    call(method, path, opts) {
      seen.push({ method, path, opts });
      const metadata = path === "/1.0/instances"
        ? [{ name: "a", location: "m1" }, { name: "b", location: "m2" }, { name: "c" }]
        : { other: true };
      return Promise.resolve({ kind: "sync", metadata });
    },
    events: () => Promise.reject(new Error("unused")),
  };
}

Deno.test("memberOnly narrows instance listings to the member and asks incusd with ?target=", async () => {
  const seen: unknown[] = [];
  const c = memberOnly(fake(seen), "m1");
  const r = await c.call("GET", "/1.0/instances", { query: { recursion: 2 } });
  assert.deepEqual(r.metadata, [{ name: "a", location: "m1" }]);
  assert.deepEqual(seen[0], {
    method: "GET",
    path: "/1.0/instances",
    opts: { query: { recursion: 2 }, target: "m1" },
  });
});

Deno.test("memberOnly leaves other calls alone", async () => {
  const seen: unknown[] = [];
  const c = memberOnly(fake(seen), "m1");
  const r = await c.call("GET", "/1.0/networks/x", { query: {} });
  assert.deepEqual(r.metadata, { other: true });
  assert.deepEqual(seen[0], { method: "GET", path: "/1.0/networks/x", opts: { query: {} } });
});
