// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Benchmarks of `isb rpc` against the real Incus (run by hand; prints ratios, asserts
 * nothing):
 *
 * 1. exec latency: `sandbox.exec` of `true` through a running `isb rpc` process, against
 *    the `incus exec` CLI and against the same REST + websocket exchange made in-process
 *    with the Incus client (the baseline; target ≤ 1.3×). A record-output REST exec (no
 *    websockets) is printed too, as the floor of what Incus needs.
 * 2. throughput: 1000 pipelined `sandbox.get` requests, against the same Incus calls made
 *    directly at the same concurrency (target ≥ 0.8× the direct rate).
 *
 * `deno run -A bench/rpc_bench.ts [--rounds N] [--execs N (default 100)] [--part exec|get|all]`. It launches one container
 * from `debian-base` (ISX_TEST_IMAGE) and deletes it at the end.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient, type IncusClient } from "../rpc/mod.ts";
import { RpcClient } from "../tests/helpers/rpc_client.ts";
import { removeInstance } from "../tests/helpers/incus_wait.ts";

const SOCKET = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";
const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    execs: { type: "string", default: "100" },
    part: { type: "string", default: "all" },
  },
});
const ROUNDS = Number(values.rounds);
const EXECS = Number(values.execs);

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
  return { median: q(0.5), p10: q(0.1), p90: q(0.9) };
}

let failures = 0;

/** Times `n` runs; a failed run (the shared daemon stalls at times) is counted, not timed. */
async function timeEach(n: number, fn: () => Promise<void>): Promise<number[]> {
  await fn().catch(() => failures++); // warm-up
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    try {
      await fn();
      out.push(performance.now() - t);
    } catch (e) {
      failures++;
      console.error(`run failed after ${(performance.now() - t).toFixed(0)} ms: ${e}`);
    }
  }
  return out.length ? out : [NaN];
}

function fmt(label: string, ms: number[], base?: number) {
  const s = stats(ms);
  const ratio = base ? `  ${(s.median / base).toFixed(2)}× baseline` : "";
  const spread = ms.length > 1 ? `  (p10 ${s.p10.toFixed(1)}, p90 ${s.p90.toFixed(1)})` : "";
  console.log(`${label.padEnd(44)} median ${s.median.toFixed(1)} ms${spread}${ratio}`);
  return s.median;
}

async function incusCli(name: string): Promise<void> {
  const r = await new Deno.Command("incus", { args: ["exec", name, "--", "true"] }).output();
  if (!r.success) throw new Error(`incus exec failed: ${new TextDecoder().decode(r.stderr)}`);
}

async function recordOutputExec(incus: IncusClient, name: string): Promise<void> {
  const r = await incus.call("POST", `/1.0/instances/${name}/exec`, {
    body: { command: ["true"], "wait-for-websocket": false, interactive: false },
  });
  if (r.kind !== "async") throw new Error("expected an operation");
  await incus.waitOperation(r, { step: "bench exec" });
}

async function execLatency(rpc: RpcClient, incus: IncusClient, name: string) {
  console.log(`\n# exec of \`true\` (${EXECS} sequential runs, best median of ${ROUNDS} rounds)`);
  const best = { rpc: Infinity, raw: Infinity, cli: Infinity, rec: Infinity };
  const rawOnce = async () => {
    const r = await incus.execCapture(name, ["true"]);
    if (r.exitCode !== 0) throw new Error("exit " + r.exitCode);
  };
  const rpcOnce = async () => {
    const r = await rpc.call("sandbox.exec", { name, argv: ["true"] });
    if (r.error) throw new Error(JSON.stringify(r.error));
  };
  for (let round = 0; round < ROUNDS; round++) {
    // raw and rpc alternate run by run, so a drifting daemon weighs on both alike
    const raw: number[] = [];
    const viaRpc: number[] = [];
    for (let i = 0; i < EXECS; i++) {
      const pair = i % 2 === 0 ? [rawOnce, rpcOnce] : [rpcOnce, rawOnce];
      for (const f of pair) {
        const t = performance.now();
        try {
          await f();
          (f === rawOnce ? raw : viaRpc).push(performance.now() - t);
        } catch (e) {
          failures++;
          console.error(`run failed: ${e}`);
        }
      }
    }
    const cli = stats(await timeEach(Math.min(EXECS, 15), () => incusCli(name))).median;
    const rec = stats(await timeEach(EXECS, () => recordOutputExec(incus, name))).median;
    best.raw = Math.min(best.raw, stats(raw).median);
    best.rpc = Math.min(best.rpc, stats(viaRpc).median);
    best.cli = Math.min(best.cli, cli);
    best.rec = Math.min(best.rec, rec);
  }
  fmt("raw REST + websockets, in-process (baseline)", [best.raw]);
  fmt("isb rpc sandbox.exec", [best.rpc], best.raw);
  fmt("incus exec CLI", [best.cli], best.raw);
  fmt("REST exec without websockets (floor)", [best.rec], best.raw);
  console.log(`ratio rpc/raw = ${(best.rpc / best.raw).toFixed(2)} (target ≤ 1.30)`);
  if (failures) console.log(`(${failures} runs failed and were left out)`);
}

async function throughput(rpc: RpcClient, incus: IncusClient, name: string, n = 1000) {
  console.log(`\n# ${n} pipelined sandbox.get (best of ${ROUNDS} rounds)`);
  const probe = await rpc.call("sandbox.get", { name });
  if (probe.error?.code === "protocol") {
    console.log("sandbox.get: pending (not registered yet)");
    return;
  }
  let bestRpc = 0;
  let bestDirect = 0;
  for (let round = 0; round < ROUNDS; round++) {
    let t = performance.now();
    const replies = await Promise.all(
      Array.from({ length: n }, () => rpc.call("sandbox.get", { name })),
    );
    const rpcRate = n / ((performance.now() - t) / 1000);
    const failed = replies.filter((r) => r.error).length;
    t = performance.now();
    const direct = await Promise.allSettled(
      Array.from({ length: n }, () => incus.getInstance(name)),
    );
    const directRate = n / ((performance.now() - t) / 1000);
    const directFailed = direct.filter((r) => r.status === "rejected").length;
    console.log(
      `round ${round + 1}: rpc ${rpcRate.toFixed(0)}/s (${failed} errors), direct ${
        directRate.toFixed(0)
      }/s (${directFailed} errors)`,
    );
    bestRpc = Math.max(bestRpc, rpcRate);
    bestDirect = Math.max(bestDirect, directRate);
  }
  console.log(
    `ratio rpc/direct = ${(bestRpc / bestDirect).toFixed(2)} (target ≥ 0.80; best ${
      bestRpc.toFixed(0)
    }/s vs ${bestDirect.toFixed(0)}/s)`,
  );
}

if (import.meta.main) {
  const name = `t-bench-${crypto.randomUUID().slice(0, 8)}`;
  const incus = createIncusClient({ socket: SOCKET });
  try {
    await incus.createInstance(
      { name, type: "container", source: { type: "image", alias: IMAGE }, start: true },
      { step: `create instance ${name}` },
    );
    await using rpc = await RpcClient.start(["--socket", SOCKET]);
    if (values.part !== "get") await execLatency(rpc, incus, name);
    if (values.part !== "exec") await throughput(rpc, incus, name);
  } finally {
    await removeInstance(incus, name).catch((e) =>
      console.error(`bench: ${e.message}; delete ${name} by hand`)
    );
    incus.close();
  }
}
