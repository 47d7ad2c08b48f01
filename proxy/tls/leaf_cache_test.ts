import { deepStrictEqual as assertEquals, equal, ok, rejects } from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import { type Leaf, LeafCache, type LeafIssuer } from "./leaf_cache.ts";

/** An issuer whose leaves arrive when the test says so. */
class FakeIssuer implements LeafIssuer {
  readonly calls: string[][] = [];
  readonly #pending: { resolve(l: Leaf): void; reject(e: unknown): void }[] = [];
  auto = true;

  issueLeaf(names: readonly string[]): Promise<Leaf> {
    this.calls.push([...names]);
    if (this.auto) return Promise.resolve({ certPem: names.join(","), keyPem: "k" });
    return new Promise((resolve, reject) => this.#pending.push({ resolve, reject }));
  }

  settle(ok: boolean): void {
    for (const p of this.#pending.splice(0)) {
      if (ok) p.resolve({ certPem: "later", keyPem: "k" });
      else p.reject(new IsbError("io", "sign: failed"));
    }
  }
}

const covers = (name: string) => name === "x.test" || name.endsWith(".x.test");

Deno.test("LeafCache.forName shares one issuance between concurrent first asks", async () => {
  const issuer = new FakeIssuer();
  issuer.auto = false;
  const cache = new LeafCache(issuer, { accepts: covers, allNames: [] });
  const asks = [cache.forName("a.x.test"), cache.forName("A.X.test."), cache.forName("a.x.test")];
  issuer.settle(true);
  const leaves = await Promise.all(asks);
  assertEquals(issuer.calls, [["a.x.test"]]);
  ok(leaves.every((l) => l === leaves[0]));
  await cache.forName("a.x.test");
  equal(issuer.calls.length, 1);
});

Deno.test("LeafCache.forName refuses names not intercepted, malformed names and no name", async () => {
  const issuer = new FakeIssuer();
  const cache = new LeafCache(issuer, { accepts: covers, allNames: [] });
  for (const name of ["", "y.test", "x.test.evil", "*.x.test", "a b.x.test", "-a.x.test"]) {
    await rejects(
      cache.forName(name),
      (e: unknown) => e instanceof IsbError && e.code === "forbidden",
    );
  }
  await rejects(cache.forName(""), /no server name \(SNI\)/);
  await rejects(cache.forName("y.test"), /issue leaf for "y\.test": not intercepted here/);
  equal(issuer.calls.length, 0);
});

Deno.test("LeafCache.forName forgets a failed issuance, the oldest names and old leaves", async () => {
  const issuer = new FakeIssuer();
  issuer.auto = false;
  let now = 1_000;
  const cache = new LeafCache(issuer, {
    accepts: covers,
    allNames: [],
    max: 2,
    maxAgeMs: 100,
    now: () => now,
  });
  const failed = cache.forName("a.x.test");
  issuer.settle(false);
  await rejects(failed, /sign: failed/);
  equal(cache.size, 0);
  issuer.auto = true;
  await cache.forName("a.x.test");
  await cache.forName("b.x.test");
  await cache.forName("a.x.test"); // a is now the most recent
  await cache.forName("c.x.test"); // evicts b
  equal(cache.size, 2);
  const before = issuer.calls.length;
  await cache.forName("a.x.test");
  equal(issuer.calls.length, before);
  await cache.forName("b.x.test");
  equal(issuer.calls.length, before + 1);
  now += 100;
  await cache.forName("b.x.test");
  equal(issuer.calls.length, before + 2);
});

Deno.test("LeafCache.all issues the all-names fallback leaf once", async () => {
  const issuer = new FakeIssuer();
  const cache = new LeafCache(issuer, { accepts: covers, allNames: ["x.test", "*.x.test"] });
  const [a, b] = await Promise.all([cache.all(), cache.all()]);
  equal(a, b);
  assertEquals(issuer.calls, [["x.test", "*.x.test"]]);
});
