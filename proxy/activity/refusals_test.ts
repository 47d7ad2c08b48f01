import { deepStrictEqual, equal } from "node:assert/strict";
import { RefusalLog, REFUSALS_KEPT } from "./refusals.ts";
import { BUCKET_MS, BUCKETS, TokenSeries } from "./series.ts";

const U = (n: number) => ({
  input_tokens: n,
  output_tokens: 2 * n,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
});

Deno.test("RefusalLog folds repeats within a second, gives each kind its fix, and keeps the last 200", () => {
  const log = new RefusalLog();
  const r = { kind: "forward_target" as const, instance: "i", target: "10.0.0.1:22", reason: "x" };
  log.add(1000, r);
  log.add(1500, r);
  log.add(3000, r);
  deepStrictEqual(log.list().map((e) => [e.at, e.count]), [[1500, 2], [3000, 1]]);
  equal(log.list()[0]!.fix?.includes("network: full"), true);
  for (let i = 0; i < REFUSALS_KEPT + 10; i++) {
    log.add(10_000 + i * 2000, { ...r, target: `t${i}` });
  }
  equal(log.list().length, REFUSALS_KEPT);
  equal(log.list().at(-1)!.target, `t${REFUSALS_KEPT + 9}`);
});

Deno.test("TokenSeries sums calls per bucket and forgets buckets older than an hour", () => {
  const s = new TokenSeries();
  s.add("i", 5, U(1));
  s.add("i", BUCKET_MS - 1, U(2));
  s.add("i", BUCKET_MS, U(4));
  deepStrictEqual(s.read("i", BUCKET_MS), {
    t: [0, BUCKET_MS / 1000],
    input: [3, 4],
    output: [6, 8],
    cache_read: [0, 0],
    cache_creation: [0, 0],
  });
  const later = BUCKETS * BUCKET_MS;
  deepStrictEqual(s.read("i", later)?.input, [4], "the first bucket is more than an hour old");
  s.add("i", later + BUCKET_MS, U(1));
  equal(s.read("i", later + BUCKET_MS)?.t.length, 1);
  s.drop("i");
  equal(s.read("i", later), undefined);
});
