// deno-lint-ignore-file no-console
/**
 * Per-poll cost of the task engine's guest reads, interleaved per iteration so host noise
 * hits all of them alike:
 *
 * - probe:  `engine.probe(name, 3 task ids)` (two running, one finished): the 2 s poll;
 * - status: `engine.status(name, id)` with 64 KiB tails: the full read;
 * - raw:    the least REST exec there is: POST exec of `true` (no websockets, no recorded
 *           output) and one wait on the operation, inline with `fetch` on the socket;
 * - cli:    `incus exec NAME -- true`.
 *
 * Then the same polls as a client pays for them, through the real `isx mcp` (a raw line
 * client over stdio) on an instance it created from `--template` with one background task
 * running: `task_status` of the task and `wait_any` of it with `timeout_seconds: 0` (one
 * probe tick), against the same raw REST exec, with the execs each call ran in the instance
 * counted from Incus's own event stream (`incus monitor`): one each.
 *
 * Run: `deno run -A bench/tasks_bench.ts [--iterations 100] [--image debian-base]
 * [--template tpl-minimal]`. Prints per-op median/mean/p90 and the ratios probe/raw,
 * probe/cli, status/raw, status/cli, then task_status/raw and wait_any/raw with execs per call.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";
import { SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { mcpPolls } from "./_mcp_polls.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "100" },
    image: { type: "string", default: "debian-base" },
    socket: { type: "string", default: "/var/lib/incus/unix.socket" },
    template: { type: "string", default: "tpl-minimal" },
  },
});
const N = Number(values.iterations);
const SOCKET = values.socket;
const name = `bench-tasks-${crypto.randomUUID().slice(0, 8)}`;
// a loaded daemon can take longer than the default 30 s to answer a create
const client = createIncusClient({ socket: SOCKET, timeouts: { requestMs: SLOW_DAEMON_MS } });
const http = Deno.createHttpClient({ proxy: { transport: "unix", path: SOCKET } });
const engine = createTaskEngine({ incus: client });
const IDS = ["t1-bnch", "t2-bnch", "t3-bnch"];

async function probe(): Promise<void> {
  const m = await engine.probe(name, IDS);
  if (m.get("t1-bnch") !== "running" || m.get("t3-bnch") !== "done") {
    throw new TypeError(`probe: ${JSON.stringify([...m])}`);
  }
}

async function status(): Promise<void> {
  const st = await engine.status(name, "t1-bnch");
  if (st.state !== "running") throw new TypeError(`status: ${st.state}`);
}

async function raw(instance = name): Promise<void> {
  const res = await fetch(`http://incus/1.0/instances/${instance}/exec`, {
    client: http,
    method: "POST",
    body: JSON.stringify({ command: ["true"], "wait-for-websocket": false, interactive: false }),
  });
  const op = await res.json();
  const wait = await fetch(`http://incus/1.0/operations/${op.metadata.id}/wait?timeout=30`, {
    client: http,
  });
  const done = await wait.json();
  if (done.metadata.metadata.return !== 0) throw new TypeError("raw: non-zero exit");
}

async function cli(): Promise<void> {
  const out = await new Deno.Command("incus", {
    args: ["exec", name, "--", "true"],
    stdout: "null",
    stderr: "null",
  }).output();
  if (!out.success) throw new TypeError(`cli: exit ${out.code}`);
}

const METHODS: Record<string, () => Promise<void>> = { probe, status, raw: () => raw(), cli };

function stats(xs: number[]) {
  const s = [...xs].sort((p, q) => p - q);
  const at = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!;
  return { median: at(0.5), mean: xs.reduce((p, q) => p + q, 0) / xs.length, p90: at(0.9) };
}

try {
  console.log(`creating ${name} from ${values.image}…`);
  const req = { name, source: { type: "image" as const, alias: values.image }, start: true };
  await client.createInstance(req, { step: `create instance ${name}` });
  const setup = await client.execCapture(name, [
    "bash",
    "-c",
    "for i in $(seq 100); do [ -S /run/systemd/private ] && break; sleep 0.2; done; " +
    "useradd -m agentuser",
  ]);
  if (setup.exitCode !== 0) throw new TypeError("setup failed");
  await engine.startCommand(name, { taskId: "t1-bnch", command: "sleep 3600" });
  await engine.startCommand(name, { taskId: "t2-bnch", command: "sleep 3600" });
  await engine.startCommand(name, { taskId: "t3-bnch", command: "seq 100000" });
  for (
    let i = 0;
    i < 50 && (await engine.probe(name, ["t3-bnch"])).get("t3-bnch") !== "done";
    i++
  ) {
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const m of Object.values(METHODS)) for (let i = 0; i < 5; i++) await m();
  const times: Record<string, number[]> = { probe: [], status: [], raw: [], cli: [] };
  const order = Object.keys(METHODS);
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(i + j) % order.length]!;
      const t0 = performance.now();
      await METHODS[k]!();
      times[k]!.push(performance.now() - t0);
    }
  }
  const st = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, stats(v)]));
  console.log(`task reads vs a bare exec of \`true\`, ${N} iterations each (ms):`);
  for (const [k, s] of Object.entries(st)) {
    console.log(
      `  ${k.padEnd(6)} median ${s.median.toFixed(2).padStart(7)}  mean ${
        s.mean.toFixed(2).padStart(7)
      }  p90 ${s.p90.toFixed(2).padStart(7)}`,
    );
  }
  const r = (a: string, b: string) => (st[a]!.median / st[b]!.median).toFixed(2);
  console.log(`  probe/raw ${r("probe", "raw")}x  probe/cli ${r("probe", "cli")}x (medians)`);
  console.log(`  status/raw ${r("status", "raw")}x  status/cli ${r("status", "cli")}x (medians)`);
  await mcpPolls({ iterations: N, template: values.template, raw });
} finally {
  await client.stopInstance(name, { step: `kill ${name}`, force: true }).catch(() => {});
  await client.deleteInstance(name, { step: `delete ${name}` }).catch((e) => console.error(e));
  client.close();
  http.close();
}
