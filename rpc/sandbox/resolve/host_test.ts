import assert from "node:assert/strict";
import { containerIdmap, inSubidRange, pickPool } from "./host.ts";
import { invalidWith, testHost } from "../../../tests/helpers/host_facts.ts";

const host = testHost;

const POOLS = [
  { pools: ["a", "default", "incus-zfs"], req: undefined, want: "incus-zfs" },
  { pools: ["a", "default"], req: "auto", want: "default" },
  { pools: ["a", "b"], req: "", want: "a" },
  { pools: ["a", "b"], req: "b", want: "b" },
];

for (const c of POOLS) {
  Deno.test(`pickPool picks ${c.want} from [${c.pools}] for ${JSON.stringify(c.req)}`, () => {
    assert.equal(
      pickPool(host({ pools: c.pools.map((name) => ({ name, driver: "dir" })) }), c.req),
      c.want,
    );
  });
}

Deno.test("pickPool with no pools is invalid", () => {
  invalidWith(() => pickPool(host({ pools: [] })), "no storage pools exist");
});

const SUBIDS = [
  {
    content: "stephan:100000:65536\nroot:1000000:1000000000\nroot:1000:1\n",
    id: 1000,
    want: false,
  },
  { content: "root:0:1000000000\n", id: 1000, want: true },
  { content: "0:0:65536\n", id: 1000, want: true },
  { content: "root:0:1000\n", id: 1000, want: false },
  { content: "garbage\nroot:x:y\n", id: 1000, want: false },
];

for (const c of SUBIDS) {
  Deno.test(`inSubidRange says ${c.want} for ${JSON.stringify(c.content)}`, () => {
    assert.equal(inSubidRange(c.content, c.id), c.want);
  });
}

Deno.test("containerIdmap renders auto per id, always, none, raw and explicit ids", () => {
  const titan = "root:1000000:1000000000\nroot:1000:1\n";
  const box = "root:0:1000000000\n";
  const h = (u: string, g: string) => host({ subuid: u, subgid: g });
  assert.deepStrictEqual(containerIdmap("auto", h(titan, titan)), {
    mode: "auto",
    raw: "both 1000 1000",
  });
  assert.deepStrictEqual(containerIdmap("auto", h(box, box)), { mode: "auto" });
  assert.deepStrictEqual(containerIdmap("auto", h(box, titan)), {
    mode: "auto",
    raw: "gid 1000 1000",
  });
  assert.deepStrictEqual(containerIdmap("auto", { ...h(titan, titan), callerOwned: true }), {
    mode: "auto",
  });
  assert.deepStrictEqual(containerIdmap("always", h(box, box)), {
    mode: "always",
    raw: "both 1000 1000",
  });
  assert.deepStrictEqual(containerIdmap("none", h(titan, titan)), { mode: "none" });
  assert.deepStrictEqual(containerIdmap({ raw: "uid 5 6" }, h(box, box)), { raw: "uid 5 6" });
  assert.deepStrictEqual(
    containerIdmap({
      mode: "always",
      host_uid: 1001,
      host_gid: 1002,
      guest_uid: 1000,
      guest_gid: 1000,
    }, h(box, box)),
    { mode: "always", raw: "uid 1001 1000\ngid 1002 1000" },
  );
  assert.deepStrictEqual(containerIdmap(undefined, h(titan, titan)), {});
});
