import assert from "node:assert/strict";
import { ciRequiresIncus, type GateDeps, liveGate } from "./live_gate.ts";

/** A gate whose probe answers from `answers` in turn (the last one repeats), on a fake clock. */
function gate(answers: (string | undefined)[], ci: boolean): GateDeps & { probes: number } {
  let t = 0;
  const d = {
    probes: 0,
    ci,
    retryMs: 120_000,
    now: () => t,
    sleep: (ms: number) => {
      t += ms;
      return Promise.resolve();
    },
    probe: () => Promise.resolve(answers[Math.min(d.probes++, answers.length - 1)]),
  };
  return d;
}

Deno.test("liveGate runs the live tests when Incus answers, in CI or not", async () => {
  for (const ci of [false, true]) {
    const d = gate([undefined], ci);
    assert.equal(await liveGate(d), undefined);
    assert.equal(d.probes, 1);
  }
});

Deno.test("liveGate outside CI skips the live tests with the probe's reason, asking once", async () => {
  const d = gate(["no incusd at /x: refused"], false);
  assert.equal(await liveGate(d), "no incusd at /x: refused");
  assert.equal(d.probes, 1);
});

Deno.test("liveGate in CI fails the run when Incus stays down, after retrying two minutes", async () => {
  const d = gate(["no incusd at /x: refused"], true);
  await assert.rejects(liveGate(d), /CI requires a live Incus: no incusd at \/x: refused/);
  assert.equal(d.probes, 121);
});

Deno.test("liveGate in CI waits out a stalled incusd that comes back", async () => {
  const d = gate(["stalled", "stalled", undefined], true);
  assert.equal(await liveGate(d), undefined);
  assert.equal(d.probes, 3);
});

Deno.test("ciRequiresIncus reads CI as set unless empty, 0 or false", () => {
  for (const v of ["1", "true", "yes", "github"]) assert.equal(ciRequiresIncus(v), true, v);
  for (const v of [undefined, "", "0", "false", "FALSE"]) assert.equal(ciRequiresIncus(v), false);
});
