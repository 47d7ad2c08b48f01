import { deepStrictEqual as assertEquals, equal, ok, rejects } from "node:assert/strict";
import { type CommandRef, CommandSources, type RunCommand } from "./command_source.ts";
import { IsbError } from "../../rpc/mod.ts";

const REF: CommandRef = { kind: "command", argv: ["gh", "auth", "token"], ttlMs: 2000 };

/** A runner answering from `answers` in turn, each run held until the test lets it go. */
function heldRunner(answers: { out?: string; code?: number }[]) {
  const calls: string[][] = [];
  let release: () => void = () => {};
  let gate = new Promise<void>((r) => (release = r));
  const run: RunCommand = async (argv) => {
    calls.push([...argv]);
    const a = answers.shift() ?? { code: 1 };
    await gate;
    return { code: a.code ?? 0, stdout: new TextEncoder().encode(a.out ?? "") };
  };
  return {
    run,
    calls,
    /** Lets the pending run(s) finish; later runs finish at once. */
    release() {
      release();
      gate = Promise.resolve();
    },
  };
}

Deno.test("CommandSources.value runs a command once for 50 concurrent callers and once per ttl", async () => {
  let now = 10_000;
  const r = heldRunner([{ out: "gho_ONE\n" }, { out: "gho_TWO" }]);
  const s = new CommandSources({ run: r.run, now: () => now });
  const all = Array.from({ length: 50 }, () => s.value(REF));
  await Promise.resolve();
  equal(s.status()[0]!.state, "refreshing");
  r.release();
  const got = await Promise.all(all);
  ok(got.every((v) => v.reveal() === "gho_ONE"));
  equal(r.calls.length, 1, "single flight");
  now += 1999;
  equal((await s.value(REF)).reveal(), "gho_ONE");
  equal(r.calls.length, 1, "within the ttl: cached");
  now += 1;
  const again = await Promise.all(Array.from({ length: 50 }, () => s.value(REF)));
  ok(again.every((v) => v.reveal() === "gho_TWO"));
  equal(r.calls.length, 2, "one run when the ttl ended");
  assertEquals(r.calls[0], ["gh", "auth", "token"]);
  equal(s.secrets().length, 2, "old and new values are both scrubbed");
});

Deno.test("CommandSources keeps the last good value for one ttl past expiry when a run fails, and reports it", async () => {
  let now = 0;
  const r = heldRunner([{ out: "gho_GOOD" }, { code: 1, out: "gho_LEAKED" }, { out: "gho_BACK" }]);
  r.release();
  const s = new CommandSources({ run: r.run, now: () => now });
  equal((await s.value(REF)).reveal(), "gho_GOOD");
  now = 2000;
  equal((await s.value(REF)).reveal(), "gho_GOOD", "the failed run keeps the last good value");
  equal(r.calls.length, 2);
  const st = s.status()[0]!;
  equal(st.state, "failing");
  equal(st.failingSince, 2000);
  equal(st.expiresAt, 4000);
  ok(st.error?.includes("exited with code 1"));
  now = 3999;
  equal((await s.value(REF)).reveal(), "gho_GOOD");
  equal(r.calls.length, 2, "a failed run is not repeated within its ttl");
  const shown = JSON.stringify(s.status()) + Deno.inspect(s, { depth: 9 });
  ok(!shown.includes("gho_"), "no value or output in status");
  now = 4000;
  equal((await s.value(REF)).reveal(), "gho_BACK", "the next run is allowed one ttl later");
  equal(s.status()[0]!.state, "ok");
  equal(s.status()[0]!.failingSince, null);
});

Deno.test("CommandSources fails closed once the last good value is a ttl past expiry", async () => {
  let now = 0;
  const r = heldRunner([{ out: "gho_GOOD" }, { code: 2 }, { code: 2 }]);
  r.release();
  const s = new CommandSources({ run: r.run, now: () => now });
  await s.value(REF);
  now = 2000;
  await s.value(REF);
  now = 4000;
  await rejects(s.value(REF), (e: unknown) => {
    ok(e instanceof IsbError && e.code === "operation_failed");
    ok((e as Error).message.includes('"gh"') && (e as Error).message.includes("code 2"));
    return true;
  });
  equal(r.calls.length, 3);
  await rejects(s.value(REF));
  equal(r.calls.length, 3, "and still runs it at most once per ttl");
});

Deno.test("CommandSources.refresh after a 401 runs the command once for all waiting, at most once per ttl", async () => {
  let now = 0;
  const r = heldRunner([{ out: "gho_OLD" }, { out: "gho_NEW" }, { out: "gho_NEWER" }]);
  r.release();
  const s = new CommandSources({ run: r.run, now: () => now });
  const old = await s.value(REF);
  const r2 = heldRunner([{ out: "gho_NEW" }, { out: "gho_NEWER" }]);
  const s2 = new CommandSources({ run: r2.run, now: () => now });
  // s2: a value first (released), then 50 concurrent 401s
  r2.release();
  const used = await s2.value({ ...REF });
  const many = Array.from({ length: 50 }, () => s2.refresh(REF, used));
  const got = await Promise.all(many);
  ok(got.every((v) => v?.reveal() === "gho_NEWER"), "everyone retries with the new value");
  equal(r2.calls.length, 2, "exactly one refresh run");
  now = 1000;
  equal(await s2.refresh(REF, got[0]!), undefined, "a second 401 within the ttl runs nothing");
  equal(r2.calls.length, 2);
  // the first source: one forced run; a 401 of a request that used the replaced value
  // retries with the new one without a run; a 401 with the new one runs nothing within ttl
  now = 0;
  const fresh = await s.refresh(REF, old);
  equal(fresh?.reveal(), "gho_NEW");
  equal(r.calls.length, 2);
  equal((await s.refresh(REF, old))?.reveal(), "gho_NEW");
  equal(await s.refresh(REF, fresh!), undefined, "a forced run is once per ttl");
  equal(r.calls.length, 2);
});

Deno.test("CommandSources.retain forgets commands a reload removed but keeps their values for scrubbing", async () => {
  const r = heldRunner([{ out: "gho_A" }]);
  r.release();
  const s = new CommandSources({ run: r.run });
  await s.value(REF);
  s.retain([]);
  assertEquals(s.status(), []);
  equal(s.secrets().length, 1);
});
