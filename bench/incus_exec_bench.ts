// deno-lint-ignore-file no-console
/**
 * Exec latency of `true` in a running container, three ways, interleaved per iteration so
 * host noise hits all of them alike:
 *
 * - ours: `client.execCapture(name, ["true"])` through rpc/incus;
 * - raw:  the minimal REST sequence on the socket (POST exec with wait-for-websocket, open the
 *         four websockets, stdin EOF, wait for the operation), written inline with `fetch` and
 *         the bare websocket client (no sessions, streams or envelope decoding): the limit;
 * - cli:  `incus exec NAME -- true`.
 *
 * Run: `deno run -A bench/incus_exec_bench.ts [--iterations 200] [--image debian-base]`
 * (or `--instance NAME` to reuse a running container you own).
 * Prints per-op median/mean/p90 and the ratios ours/raw (target ≤ 1.2) and ours/cli (< 1).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient, WsClient } from "../rpc/mod.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "200" },
    image: { type: "string", default: "debian-base" },
    socket: { type: "string", default: "/var/lib/incus/unix.socket" },
    instance: { type: "string" }, // reuse a running container instead of creating one
  },
});
const N = Number(values.iterations);
const SOCKET = values.socket;
const name = values.instance ?? `bench-exec-${crypto.randomUUID().slice(0, 8)}`;

const client = createIncusClient({ socket: SOCKET });
const http = Deno.createHttpClient({ proxy: { transport: "unix", path: SOCKET } });

async function ours(): Promise<void> {
  const r = await client.execCapture(name, ["true"]);
  if (r.exitCode !== 0) throw new TypeError(`ours: exit ${r.exitCode}`);
}

async function openWs(path: string): Promise<WsClient> {
  const ws = new WsClient();
  await ws.connect({ socket: SOCKET }, path);
  return ws;
}

async function raw(): Promise<void> {
  const res = await fetch(`http://incus/1.0/instances/${name}/exec`, {
    client: http,
    method: "POST",
    body: JSON.stringify({
      command: ["true"],
      environment: {},
      "wait-for-websocket": true,
      interactive: false,
    }),
  });
  const op = await res.json();
  const id = op.metadata.id as string;
  const fds = op.metadata.metadata.fds as Record<string, string>;
  const sockets = await Promise.all(
    ["control", "0", "1", "2"].map((k) =>
      openWs(`/1.0/operations/${id}/websocket?secret=${fds[k]}`)
    ),
  );
  await sockets[1]!.send("", false); // stdin EOF
  const wait = await fetch(`http://incus/1.0/operations/${id}/wait?timeout=30`, { client: http });
  const done = await wait.json();
  if (done.metadata.metadata.return !== 0) throw new TypeError("raw: non-zero exit");
  await Promise.all(
    sockets.map((s) => s.readyState === 3 ? 0 : new Promise((ok) => s.on("close", ok))),
  );
}

async function cli(): Promise<void> {
  const out = await new Deno.Command("incus", {
    args: ["exec", name, "--", "true"],
    stdout: "null",
    stderr: "null",
  }).output();
  if (!out.success) throw new TypeError(`cli: exit ${out.code}`);
}

const METHODS: Record<string, () => Promise<void>> = { ours, raw, cli };

function stats(xs: number[]) {
  const s = [...xs].sort((p, q) => p - q);
  const at = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!;
  return { median: at(0.5), mean: xs.reduce((p, q) => p + q, 0) / xs.length, p90: at(0.9) };
}

try {
  if (!values.instance) {
    console.log(`creating ${name} from ${values.image}…`);
    const req = { name, source: { type: "image" as const, alias: values.image }, start: true };
    await client.createInstance(req, { step: `create instance ${name}` });
  }
  for (const m of Object.values(METHODS)) for (let i = 0; i < 5; i++) await m().catch(() => {});
  const times: Record<string, number[]> = { ours: [], raw: [], cli: [] };
  const failures: Record<string, number> = {};
  const order = Object.keys(METHODS);
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < order.length; j++) {
      const k = order[(i + j) % order.length]!;
      const t0 = performance.now();
      try {
        await METHODS[k]!();
        times[k]!.push(performance.now() - t0);
      } catch (e) {
        failures[k] = (failures[k] ?? 0) + 1; // a stalled shared daemon must not end the run
        console.error(`${k}: ${e instanceof Error ? e.message : e}`);
      }
    }
  }
  const st = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, stats(v)]));
  console.log(`exec of \`true\`, ${N} iterations each (ms):`);
  for (const [k, s] of Object.entries(st)) {
    if (!times[k]!.length) continue;
    console.log(
      `  ${k.padEnd(5)} median ${s.median.toFixed(2).padStart(7)}  mean ${
        s.mean.toFixed(2).padStart(7)
      }  p90 ${s.p90.toFixed(2).padStart(7)}  (n=${times[k]!.length}, failed ${failures[k] ?? 0})`,
    );
  }
  const r = (a: string, b: string, f: "median" | "mean") => (st[a]![f] / st[b]![f]).toFixed(2);
  console.log(
    `  ours/raw: median ${r("ours", "raw", "median")}x, mean ${r("ours", "raw", "mean")}x`,
  );
  console.log(
    `  ours/cli: median ${r("ours", "cli", "median")}x, mean ${r("ours", "cli", "mean")}x`,
  );
} finally {
  if (!values.instance) {
    await client.stopInstance(name, { step: `kill ${name}`, force: true }).catch(() => {});
    await client.deleteInstance(name, { step: `delete ${name}` }).catch((e) => console.error(e));
  }
  client.close();
  http.close();
}
