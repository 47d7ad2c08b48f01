/**
 * The CA repair of `isx start|shell|branch` (mcp/instances/ca_trust.ts), run by hand against
 * a real incusd: one container from the base image trusting CA A; each round repairs it to
 * the other CA through {@link repairGuestCa} (the bundle edited through the files API),
 * against the baseline the repair first used: the CA file pushed, then
 * `update-ca-certificates` run in the guest. Prints the medians and their ratio.
 *
 *   deno run -A bench/ca_repair_bench.ts [rounds=7]
 *
 * @module
 */

import { createIncusClient } from "../rpc/mod.ts";
import { capture, GUEST_CA_PATH, repairGuestCa, SLOW_DAEMON_MS, waitForRun } from "../mcp/mod.ts";
import { certFingerprint, createCa } from "../proxy/tls/ca.ts";

const ROUNDS = Number(Deno.args[0] ?? 7);
const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const NAME = `t-bench-ca-${crypto.randomUUID().slice(0, 6)}`;
const c = createIncusClient({
  socket: Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket",
  timeouts: { requestMs: SLOW_DAEMON_MS },
});
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const cas = await Promise.all([createCa(), createCa()]);
const fps = await Promise.all(cas.map((ca) => certFingerprint(ca.certPem)));

async function baseline(pem: string): Promise<number> {
  const t = performance.now();
  await c.pushFile(NAME, GUEST_CA_PATH, pem, { step: "CA", uid: 0, gid: 0, mode: 0o644 });
  await capture(c, NAME, ["update-ca-certificates"], { step: "u", env: { TMPDIR: "/var/tmp" } });
  return performance.now() - t;
}

try {
  await c.createInstance({
    name: NAME,
    type: "container",
    source: { type: "image", alias: IMAGE },
    start: true,
  }, { step: `create ${NAME}` });
  await waitForRun(c, NAME);
  await baseline(cas[0].certPem);
  const fast: number[] = [];
  const slow: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const to = (i + 1) % 2;
    const t = performance.now();
    await repairGuestCa(c, NAME, { pem: cas[to]!.certPem, fingerprint: fps[to]! });
    fast.push(performance.now() - t);
    slow.push(await baseline(cas[i % 2]!.certPem));
    await repairGuestCa(c, NAME, { pem: cas[to]!.certPem, fingerprint: fps[to]! });
  }
  const [f, s] = [median(fast), median(slow)];
  // deno-lint-ignore no-console
  console.log(
    `CA repair (median of ${ROUNDS}): ${f.toFixed(0)} ms; baseline push + ` +
      `update-ca-certificates: ${s.toFixed(0)} ms; ratio ${(f / s).toFixed(2)}x`,
  );
} finally {
  await c.stopInstance(NAME, { step: "stop", force: true }).catch(() => {});
  await c.deleteInstance(NAME, { step: "delete" }).catch(() => {});
  c.close();
}
