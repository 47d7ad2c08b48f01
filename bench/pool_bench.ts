// deno-lint-ignore-file no-console
/**
 * Warm pools (issue 21), side by side in one run on a real incusd, in a project of the
 * bench's own (tests/helpers/pool_lab.ts):
 *
 * 1. `create_instance` → the first `exec` answered, through `isx mcp` (the SDK client):
 *    a pool hit (a ready member claimed, as a kept pool holds it: filled earlier, its boot
 *    over), against a cold `create_instance` (no pool configured) and against the bare
 *    `incus copy` + start + IPv4 as REST calls in one process (polling the state every 25
 *    ms). Target: pool hit p50 ≤ 150 ms. Both ratios are printed, and beside them a member
 *    claimed the moment its fill ends (its guest still booting: the worst case, which an
 *    emptied pool's next claim meets).
 * 2. `delegate` with `template: tpl-agents`, a pool hit: from the call to its answer (the run
 *    launched: guest checks, runner pushed, agent started), target ≤ 500 ms.
 * 3. Memory of an idle member: Incus's `memory.usage` (the cgroup) and the summed RSS of its
 *    processes, for tpl-minimal and tpl-agents.
 *
 * The servers run with --no-preflight (no proxy in the bench's home), so the preflight's one
 * loopback read of the proxy's /health is not in the figures.
 *
 *   deno run -A bench/pool_bench.ts [rounds=7]
 *
 * @module
 */

import type { Client } from "@modelcontextprotocol/client";
import { execRecorded, waitForIpv4 } from "../mcp/mod.ts";
import { call, connect } from "../tests/helpers/mcp.ts";
import { PoolLab, SOURCE_TEMPLATE } from "../tests/helpers/pool_lab.ts";
import { ensureTemplate } from "../tests/helpers/agents_lab.ts";

const ROUNDS = Number(Deno.args[0] ?? 7);
const NP = ["--no-preflight"];
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

function fmt(xs: number[]): string {
  return `p50 ${p50(xs).toFixed(0)} ms (min ${Math.min(...xs).toFixed(0)}, max ${
    Math.max(...xs).toFixed(0)
  }; n=${xs.length})`;
}

async function createThenExec(
  c: Client,
): Promise<{ ms: number; createMs: number; name: string }> {
  const t = performance.now();
  const r = sc(await call(c, "create_instance", { template: SOURCE_TEMPLATE }));
  const createMs = performance.now() - t;
  const ex = sc(await call(c, "exec", { instance: r.instance, command: "true" }));
  const ms = performance.now() - t;
  if (ex.exit_code !== 0) throw new Error(`exec in ${r.instance}: ${JSON.stringify(ex)}`);
  return { ms, createMs, name: String(r.instance) };
}

function mcpYaml(lab: PoolLab, pool: Record<string, number>, templates = [SOURCE_TEMPLATE]) {
  const p = Object.entries(pool).map(([k, v]) => `${k}: ${v}`).join(", ");
  Deno.writeTextFileSync(
    `${lab.home.configDir}/mcp.yaml`,
    `templates: [${templates.join(", ")}]\nmax-instances: 50\nwarm-pool: {${p}}\n`,
  );
}

/**
 * Waits until `name`'s boot is over (its cgroup's CPU use under 2% of a core over 500 ms, at
 * most 20 s), as a member the keeper filled earlier is; returns how long that took.
 */
async function settled(lab: PoolLab, name: string): Promise<number> {
  const t = performance.now();
  const cpu = async () => (await lab.incus.getInstanceState(name)).cpu?.usage ?? 0;
  let last = await cpu();
  while (performance.now() - t < 20_000) {
    await new Promise((r) => setTimeout(r, 500));
    const now = await cpu();
    if (now - last < 0.02 * 500e6) break;
    last = now;
  }
  return performance.now() - t;
}

async function memoryOf(lab: PoolLab, name: string): Promise<string> {
  await new Promise((r) => setTimeout(r, 5000)); // idle: let the boot settle
  const st = await lab.incus.getInstanceState(name);
  const r = await execRecorded(lab.incus, name, [
    "sh",
    "-c",
    "ps -eo rss= | awk '{s+=$1} END {print s}'",
  ], { step: "sum RSS" });
  const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
  return `incus memory.usage ${mib(st.memory?.usage ?? 0)} MiB, summed RSS ${
    (Number(r.stdout.trim()) / 1024).toFixed(1)
  } MiB`;
}

if (import.meta.main) {
  await using lab = await PoolLab.open({ pool: 1, proxy: false });
  const load = Deno.loadavg().map((x) => x.toFixed(2)).join(" ");
  console.log(`pool_bench: project ${lab.project}, ${ROUNDS} rounds, load average ${load}`);
  const c = await connect(lab.home, "legacy", { extra: NP });
  const hit: number[] = [];
  const hitCreate: number[] = [];
  const hitFresh: number[] = [];
  const settleMs: number[] = [];
  const cold: number[] = [];
  const bare: number[] = [];
  try {
    // warm-up: one cold create loads the session's modules
    const w = await createThenExec(c);
    await call(c, "destroy_instance", { instance: w.name });
    for (let i = 0; i < ROUNDS; i++) {
      mcpYaml(lab, { [SOURCE_TEMPLATE]: 1 });
      // a member claimed the moment its fill ends (its guest still finishing its boot)
      let f = await lab.isx(["pool", "fill"]);
      if (f.code !== 0) throw new Error(`isx pool fill: ${f.err}`);
      const fresh = await createThenExec(c);
      if (!fresh.name.startsWith("pool-")) throw new Error(`not a pool hit: ${fresh.name}`);
      hitFresh.push(fresh.ms);
      await call(c, "destroy_instance", { instance: fresh.name });
      // a member as a kept pool holds it: filled earlier, its boot over
      f = await lab.isx(["pool", "fill"]);
      if (f.code !== 0) throw new Error(`isx pool fill: ${f.err}`);
      const [member] = await lab.members("ready");
      settleMs.push(await settled(lab, member!));
      const h = await createThenExec(c);
      if (!h.name.startsWith("pool-")) throw new Error(`not a pool hit: ${h.name}`);
      hit.push(h.ms);
      hitCreate.push(h.createMs);
      mcpYaml(lab, {});
      const k = await createThenExec(c);
      if (k.name.startsWith("pool-")) throw new Error(`not cold: ${k.name}`);
      cold.push(k.ms);
      const name = `i-pool-bare-${i}`;
      const t = performance.now();
      await lab.incus.createInstance({
        name,
        source: { type: "copy", source: SOURCE_TEMPLATE, instance_only: true },
      }, { step: "bare copy" });
      await lab.incus.startInstance(name, { step: "bare start" });
      await waitForIpv4(lab.incus, name);
      bare.push(performance.now() - t);
      for (const n of [h.name, k.name]) await call(c, "destroy_instance", { instance: n });
      await lab.incus.stopInstance(name, { step: "stop", force: true });
      await lab.incus.deleteInstance(name, { step: "delete" });
    }
  } finally {
    await c.close();
  }
  console.log(`create_instance → first exec, pool hit:  ${fmt(hit)}  (target p50 ≤ 150 ms)`);
  console.log(`  of which create_instance alone:        ${fmt(hitCreate)}`);
  console.log(`  (members whose boot had ended; that took ${fmt(settleMs)} after the fill)`);
  console.log(`  a member claimed as its fill ends:     ${fmt(hitFresh)}`);
  console.log(`create_instance → first exec, cold:      ${fmt(cold)}`);
  console.log(`incus copy + start + IPv4 (REST):        ${fmt(bare)}`);
  console.log(
    `ratios: pool hit / cold = ${(p50(hit) / p50(cold)).toFixed(3)}, pool hit / copy+start+IPv4 = ${
      (p50(hit) / p50(bare)).toFixed(3)
    }`,
  );
  // delegate with a template, served from the pool
  // built once in the suite's lab when missing (npm packages through the shared test cache)
  const agents = await ensureTemplate().then(() => lab.copyTemplate("tpl-agents")).then(
    () => true,
    (e) => {
      console.log(`no tpl-agents: ${e}`);
      return false;
    },
  );
  if (agents) {
    const d = await connect(lab.home, "legacy", { extra: NP });
    const launched: number[] = [];
    try {
      for (let i = 0; i < Math.min(ROUNDS, 5); i++) {
        mcpYaml(lab, { "tpl-agents": 1 }, [SOURCE_TEMPLATE, "tpl-agents"]);
        const f = await lab.isx(["pool", "fill"]);
        if (f.code !== 0) throw new Error(`isx pool fill: ${f.err}`);
        const t = performance.now();
        const r = sc(
          await call(d, "delegate", { template: "tpl-agents", instruction: `bench ${i}` }),
        );
        launched.push(performance.now() - t);
        if (!String(r.instance).startsWith("pool-")) throw new Error(`not a hit: ${r.instance}`);
        await call(d, "cancel_task", { task_id: String(r.task_id) }).catch(() => {});
        await call(d, "destroy_instance", { instance: String(r.instance) });
      }
    } finally {
      await d.close();
    }
    console.log(`delegate with template, pool hit → run launched: ${fmt(launched)}  (≤ 500 ms)`);
  }
  // memory of idle members
  for (const tpl of [SOURCE_TEMPLATE, "tpl-agents"]) {
    mcpYaml(lab, { [tpl]: 1 }, [SOURCE_TEMPLATE, "tpl-agents"]);
    const f = await lab.isx(["pool", "fill"]);
    const [m] = await lab.members("ready");
    if (f.code !== 0 || !m) {
      console.log(`idle member of ${tpl}: not made (${f.err.trim().split("\n").pop()})`);
      continue;
    }
    console.log(`idle member of ${tpl}: ${await memoryOf(lab, m)}`);
    await lab.isx(["pool", "drain"]);
  }
}
