import { deepEqual, equal } from "node:assert/strict";
import { backoffDelay, Converger } from "./_converge.ts";

/** A clock whose sleeps resolve when the test says so, recording each wait. */
function manualSleep() {
  const waits: number[] = [];
  let wake: (() => void) | undefined;
  return {
    waits,
    sleep(ms: number, signal: AbortSignal): Promise<void> {
      waits.push(ms);
      return new Promise<void>((resolve) => {
        wake = resolve;
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    },
    /** Ends the current sleep and lets the attempt after it run. */
    async tick() {
      const w = wake;
      wake = undefined;
      w?.();
      for (let i = 0; i < 5; i++) await Promise.resolve();
    },
  };
}

Deno.test("backoffDelay doubles from the first wait and stops at the cap", () => {
  const b = { firstMs: 250, maxMs: 2000 };
  deepEqual([1, 2, 3, 4, 5, 9].map((n) => backoffDelay(n, b)), [250, 500, 1000, 2000, 2000, 2000]);
});

Deno.test("Converger.need retries a failing need with backoff until it holds, pending until then", async () => {
  const clock = manualSleep();
  const c = new Converger({ sleep: clock.sleep, backoff: { firstMs: 250, maxMs: 1000 } });
  let fails = 4;
  const attempt = () => {
    if (fails-- > 0) {
      return Promise.reject(new Error("dnsmasq: Address already in use (HTTP 500)"));
    }
    return Promise.resolve();
  };
  equal(await c.need("dns", attempt), false, "the first attempt failed");
  deepEqual(c.pending(), [
    { need: "dns", error: "dnsmasq: Address already in use (HTTP 500)", attempts: 1 },
  ]);
  equal(c.holds("dns"), false);
  for (let i = 0; i < 4; i++) await clock.tick();
  deepEqual(c.pending(), [], "held after the fifth attempt");
  equal(c.holds("dns"), true);
  deepEqual(clock.waits, [250, 500, 1000, 1000]);
  await c.close();
});

Deno.test("Converger.need counts a need as pending while its first attempt runs", async () => {
  const c = new Converger({ sleep: manualSleep().sleep });
  let release: () => void = () => {};
  const first = c.need("registry", () => new Promise<void>((r) => (release = r)));
  deepEqual(c.pending().map((p) => p.need), ["registry"]);
  release();
  equal(await first, true);
  deepEqual(c.pending(), []);
  await c.close();
});

Deno.test("Converger.close stops the retries, and a need that holds at once is never pending", async () => {
  const clock = manualSleep();
  const c = new Converger({ sleep: clock.sleep });
  equal(await c.need("conn_limit", () => Promise.resolve()), true);
  let tries = 0;
  equal(await c.need("guard", () => (tries++, Promise.reject(new Error("nft: busy")))), false);
  await clock.tick();
  equal(tries, 2);
  await c.close();
  await clock.tick();
  equal(tries, 2, "no attempt after close");
  deepEqual(c.pending().map((p) => [p.need, p.attempts]), [["guard", 2]]);
});
