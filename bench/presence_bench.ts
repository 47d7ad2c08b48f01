// deno-lint-ignore-file no-console
/**
 * What the presence scan (joining, §12.4) adds to the guest reads that carry it: the status
 * read of an agent task (`task_status`, `task_result`, `wait_any`'s finish) and the probe of
 * the poller's slow rounds and `send_message` (`PROBE_SH --presence`). Measured with the
 * engine's own exec path against a copy of a template holding one finished agent task and,
 * with `--person`, a person's agent-shaped process (`exec -a claude`) in its directory.
 *
 * - baseline: the same status script with the `presence` call taken out, and the plain probe;
 * - with presence: the scripts as they ship.
 *
 * Run: `deno run -A bench/presence_bench.ts [--iterations 20] [--template tpl-minimal] [--person]`.
 * Prints median/p90 per variant and the ratios against the baselines.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";
import { execRecorded } from "../mcp/mod.ts";
import { PROBE_SH, STATUS_SH } from "../guest/mod.ts";
import { runGuestScript } from "../mcp/tasks/guest_exec.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "20" },
    template: { type: "string", default: "tpl-minimal" },
    socket: { type: "string", default: "/var/lib/incus/unix.socket" },
    person: { type: "boolean", default: false },
  },
});
const N = Number(values.iterations);
const name = `bench-presence-${crypto.randomUUID().slice(0, 8)}`;
const client = createIncusClient({ socket: values.socket, timeouts: { requestMs: 120_000 } });
const ID = "t1-bench";
const CALL = '[ "$kind" != agent ] || presence "$id"';
if (!STATUS_SH.includes(CALL)) throw new TypeError("the status script no longer calls presence");
const STATUS_BASE = STATUS_SH.replace(CALL, ":");

async function root(script: string): Promise<string> {
  const r = await execRecorded(client, name, ["bash", "-c", script], { step: "bench" });
  if (r.exitCode !== 0) throw new TypeError(`${script}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

async function times(sh: string, args: string[]): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const r = await runGuestScript(client, name, sh, args, { user: "agentuser", step: "bench" });
    ms.push(performance.now() - t0);
    if (r.code !== 0) throw new TypeError(`exit ${r.code}: ${r.stderr}`);
  }
  return ms.sort((a, b) => a - b);
}

const med = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => xs[Math.floor(xs.length * 0.9)]!;

try {
  await client.createInstance({
    name,
    source: { type: "copy", source: values.template, instance_only: true },
    start: true,
  }, { step: `copy ${values.template}` });
  const d = `/home/agentuser/.isx-mcp/tasks/${ID}`;
  await root(
    `mkdir -p ${d} /home/agentuser/proj && cd ${d} && echo agent >kind && echo claude >agent && ` +
      `echo 0f0f0f0f-0000-4000-8000-000000000001 >session_id && echo /home/agentuser/proj >cwd && ` +
      `echo 1 >current && echo 0 >exit-1 && : >events-1.jsonl && chown -R agentuser: /home/agentuser`,
  );
  if (values.person) {
    await root(
      `cd /home/agentuser/proj && setsid bash -c 'exec -a claude sleep 3600' </dev/null >/dev/null 2>&1 &`,
    );
  }
  // warm-up: the first exec of each pays for page-cache misses
  await times(STATUS_BASE, [ID, "65536", "65536"]);
  const rows: [string, number[]][] = [
    ["status (baseline)", await times(STATUS_BASE, [ID, "65536", "65536"])],
    ["status + presence", await times(STATUS_SH, [ID, "65536", "65536"])],
    ["probe (baseline)", await times(PROBE_SH, [ID])],
    ["probe + presence", await times(PROBE_SH, ["--presence", ID])],
  ];
  console.log(
    `presence scan cost (${N} iterations, ${values.template}${
      values.person ? ", a person's agent present" : ""
    }), ms per exec:`,
  );
  for (const [label, xs] of rows) {
    console.log(`  ${label.padEnd(18)} median ${med(xs).toFixed(1)}  p90 ${p90(xs).toFixed(1)}`);
  }
  const r = (a: number, b: number) => (med(rows[b]![1]) / med(rows[a]![1])).toFixed(2);
  console.log(`ratio status+presence/status (median): ${r(0, 1)}x`);
  console.log(`ratio probe+presence/probe (median): ${r(2, 3)}x`);
} finally {
  await client.stopInstance(name, { step: "stop", force: true }).catch(() => {});
  await client.deleteInstance(name, { step: "delete" }).catch(() => {});
  client.close();
}
