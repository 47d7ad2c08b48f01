// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Proxy benchmark (run by hand): added latency per request, streaming throughput, , and the
 * proxy's resident memory idle and after concurrent streams, each against the baseline "straight to
 * the mock upstream". The client, the mock upstream and the proxy are three processes (as
 * in real use: guest, remote service, host proxy); both paths are TLS with keep-alive from
 * the same client (`fetch`, one HTTP client). The proxy path terminates TLS, injects the
 * credential, scrubs the response of the real key, reads SSE usage, counts, and
 * re-encrypts.
 *
 *   deno run -A bench/proxy_bench.ts [--requests 1000] [--mb 64] [--rounds 5] [--streams 50]
 *     [--variant NAME=DIR[:V8FLAGS]]... [--cpu-prof DIR]
 *
 * Targets (issue 11): < 1 ms added per request at the median; >= 0.8x the direct streaming
 * throughput; idle resident memory (VmRSS) <= 60 MiB. The proxy process loads what `isx proxy
 * run` loads (cli/proxy_run.ts, or cli/proxy.ts in older trees) and starts with the V8 flags
 * `isx proxy start` gives it (PROXY_V8_FLAGS). Each `--variant` adds a proxy built from
 * another checkout (`git worktree add /tmp/before <commit>`: the baseline "before") or with
 * other V8 flags (`semi4=.:--max-semi-space-size=4`); all proxies run side by side and the
 * rounds rotate through them, so before/after ratios come from one invocation. `--cpu-prof DIR`
 * writes each proxy's V8 CPU profile to `DIR/<variant>/` when it exits (open it in Chrome's
 * DevTools); the proxy CPU per request row is the proxy's CPU over the timed requests.
 *
 * The paths alternate (latency in ten blocks, streams round by round) so a change in the
 * machine's load hits both; the stream ratio is of the medians. Each round also records the
 * CPU milliseconds per MiB of every process, which other load barely changes, and from them
 * an estimate of the rates with a core per process: on 2 shared cores the measured ratio is
 * bounded by CPU. The load average is printed with the results. The upstream and proxy
 * roles are `_proxy_roles.ts`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { proxyRole, type Role, spawnRole, upstreamRole } from "./_proxy_roles.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    requests: { type: "string", default: "1000" },
    mb: { type: "string", default: "64" },
    streams: { type: "string", default: "50" },
    rounds: { type: "string", default: "5" },
    variant: { type: "string", multiple: true, default: [] },
    role: { type: "string", default: "client" },
    dir: { type: "string" },
    tree: { type: "string" },
    upstream: { type: "string" },
    "cpu-prof": { type: "string" },
  },
});
const enc = new TextEncoder();
const HERE = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

function say(text: string): void {
  console.log(text);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}

/** VmRSS (now) and VmHWM (peak) of a process, MiB. */
function rssMiB(pid: number): { now: number; peak: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
  return { now: kb("VmRSS"), peak: kb("VmHWM") };
}

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number | "self"): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

function loadavg(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

const median = (xs: number[]) => pct(xs, 0.5);
const f = (x: number) => x.toFixed(2);

/** One path measured: the direct one, or a proxy variant. */
interface Path {
  name: string;
  port: number;
  role?: Role;
  lat: number[];
  /** CPU seconds the path's proxy used over the timed requests. */
  latCpu: number;
  rounds: { rate: number; cpu: number[] }[];
  rss: { idle?: number; after?: { now: number; peak: number } };
  wall?: number;
}

/** This tree's proxy with the launcher's V8 flags, then each `--variant NAME=DIR[:FLAGS]`. */
async function variants(): Promise<{ name: string; tree: string; v8: string }[]> {
  // imported here, not at the top: every role loads the top, and a proxy must load only its own
  const { PROXY_V8_FLAGS } = await import("../cli/proxy_lifecycle.ts");
  const out = [{ name: "proxied", tree: HERE, v8: PROXY_V8_FLAGS }];
  for (const v of values.variant as string[]) {
    const m = /^([\w-]+)=([^:]+)(?::(.*))?$/.exec(v);
    if (!m) throw new Error(`--variant ${v}: expected NAME=DIR[:V8FLAGS]`);
    const tree = Deno.realPathSync(m[2]!);
    out.push({ name: m[1]!, tree, v8: m[3] ?? "" });
  }
  return out;
}

async function client(): Promise<void> {
  const N = Number(values.requests);
  const MB = Number(values.mb);
  const STREAMS = Number(values.streams);
  const ROUNDS = Number(values.rounds);
  const { createCa, signerFromPem } = await import("../proxy/tls/ca.ts");
  const dir = await Deno.makeTempDir();
  const caPem = await createCa();
  const leaf = await (await signerFromPem(caPem.certPem, caPem.keyPem)).issueLeaf(["localhost"]);
  await Deno.writeTextFile(`${dir}/ca.json`, JSON.stringify(caPem), { mode: 0o600 });
  await Deno.writeTextFile(`${dir}/leaf.json`, JSON.stringify(leaf), { mode: 0o600 });
  const up = await spawnRole(["--role", "upstream", "--dir", dir]);
  const paths: Path[] = [{
    name: "direct",
    port: up.port,
    lat: [],
    latCpu: 0,
    rounds: [],
    rss: {},
  }];
  for (const v of await variants()) {
    const args = ["--role", "proxy", "--dir", dir, "--upstream", String(up.port), "--tree", v.tree];
    const prof = values["cpu-prof"]
      ? ["--cpu-prof", `--cpu-prof-dir=${values["cpu-prof"]}/${v.name}`]
      : [];
    const role = await spawnRole(args, v.v8, prof);
    paths.push({ name: v.name, port: role.port, role, lat: [], latCpu: 0, rounds: [], rss: {} });
  }
  await new Promise((r) => setTimeout(r, 2000)); // idle: started, settled, nothing served yet
  for (const p of paths) if (p.role) p.rss.idle = rssMiB(p.role.child.pid).now;
  const http = Deno.createHttpClient({ caCerts: [caPem.certPem] });
  const headers = { "x-api-key": "sk-ant-placeholder", "content-type": "application/json" };
  const post = async (port: number, query = "") => {
    const res = await fetch(`https://localhost:${port}/v1/messages${query}`, {
      method: "POST",
      headers,
      body: "{}",
      client: http,
    });
    let n = 0;
    for await (const c of res.body!) n += c.length;
    return n;
  };
  // The paths take turns, in an order that rotates, so a change in the machine's load hits all.
  const turn = (i: number) => paths.map((_, k) => paths[(k + i) % paths.length]!);
  for (const p of paths) for (let i = 0; i < 100; i++) await post(p.port);
  for (let b = 0; b < 10; b++) {
    for (const p of turn(b)) {
      const c0 = p.role ? cpuSeconds(p.role.child.pid) : 0;
      for (let i = 0; i < N / 10; i++) {
        const t = performance.now();
        await post(p.port);
        p.lat.push(performance.now() - t);
      }
      if (p.role) p.latCpu += cpuSeconds(p.role.child.pid) - c0;
    }
  }
  // CPU per MiB of each process on one stream: the client, the upstream, the path's proxy.
  const throughput = async (p: Path) => {
    await post(p.port, "?stream=4");
    const pids = [up.child.pid, ...(p.role ? [p.role.child.pid] : [])];
    const c0 = [cpuSeconds("self"), ...pids.map(cpuSeconds)];
    const t = performance.now();
    const mib = (await post(p.port, `?stream=${MB}`)) / 1048576;
    const s = (performance.now() - t) / 1000;
    const cpu = [cpuSeconds("self"), ...pids.map(cpuSeconds)].map((c, i) =>
      (c - c0[i]!) * 1000 / mib
    );
    p.rounds.push({ rate: mib / s, cpu });
  };
  const loads = [loadavg()];
  for (let r = 0; r < ROUNDS; r++) for (const p of turn(r)) await throughput(p);
  loads.push(loadavg());
  for (const p of paths) {
    const t = performance.now();
    await Promise.all(Array.from({ length: STREAMS }, () => post(p.port, "?stream=2")));
    p.wall = (performance.now() - t) / 1000;
    if (p.role) p.rss.after = rssMiB(p.role.child.pid);
  }
  loads.push(loadavg());
  const counts: string[] = [];
  for (const p of paths.slice(1)) {
    const w = p.role!.child.stdin.getWriter();
    await w.write(enc.encode("report\n"));
    await w.close();
    counts.push(`${p.name} ${(await p.role!.lines.read()).value?.trim()}`);
    await p.role!.child.status;
    await p.role!.lines.cancel();
  }
  up.child.kill();
  await up.child.status;
  await up.child.stdin.close();
  await up.lines.cancel();
  http.close();
  await Deno.remove(dir, { recursive: true });
  report(paths, { N, MB, STREAMS, ROUNDS }, loads, counts);
}

function report(
  paths: Path[],
  o: { N: number; MB: number; STREAMS: number; ROUNDS: number },
  loads: string[],
  counts: string[],
): void {
  const [d, ...px] = paths as [Path, ...Path[]];
  const rate = (p: Path) => median(p.rounds.map((r) => r.rate));
  const cpu = (p: Path, i: number) => median(p.rounds.map((r) => r.cpu[i]!));
  const rows: string[][] = [];
  for (const q of [0.5, 0.9, 0.99]) {
    rows.push([
      `latency p${q * 100} (ms)`,
      ...paths.map((p) => f(pct(p.lat, q))),
      px.map((p) => `+${f(pct(p.lat, q) - pct(d.lat, q))}`).join(" ") +
      (q === 0.5 ? " ms (target < 1 ms)" : " ms"),
    ]);
  }
  rows.push([
    "  proxy CPU per request (ms)",
    "-",
    ...px.map((p) => f(p.latCpu * 1000 / p.lat.length)),
    "",
  ]);
  rows.push([
    `one ${o.MB} MiB SSE stream (MiB/s, median)`,
    ...paths.map((p) => f(rate(p))),
    px.map((p) => `${f(rate(p) / rate(d))}x`).join(" ") + " (target >= 0.8x)",
  ]);
  rows.push([
    "  per-round ratio, median",
    "",
    ...px.map((p) => f(median(p.rounds.map((r, i) => r.rate / d.rounds[i]!.rate)))),
    "",
  ]);
  rows.push(["  client CPU (ms per MiB, median)", ...paths.map((p) => f(cpu(p, 0))), ""]);
  rows.push(["  upstream CPU (ms per MiB, median)", ...paths.map((p) => f(cpu(p, 1))), ""]);
  rows.push(["  proxy CPU (ms per MiB, median)", "-", ...px.map((p) => f(cpu(p, 2))), ""]);
  // Not a measurement: the rate if every process had a core of its own (the busiest bounds it).
  const busiest = (p: Path) => Math.max(...p.rounds[0]!.cpu.map((_, i) => cpu(p, i)));
  rows.push([
    "  estimate, a core per process (MiB/s)",
    ...paths.map((p) => f(1000 / busiest(p))),
    px.map((p) => `${f(busiest(d) / busiest(p))}x`).join(" "),
  ]);
  rows.push([
    `${o.STREAMS} concurrent 2 MiB streams, wall (s)`,
    ...paths.map((p) => f(p.wall!)),
    px.map((p) => `${f(p.wall! / d.wall!)}x`).join(" "),
  ]);
  rows.push([
    "proxy RSS idle after start (MiB)",
    "-",
    ...px.map((p) => f(p.rss.idle!)),
    "(target <= 60)",
  ]);
  rows.push([
    `proxy RSS after ${o.STREAMS} streams (MiB)`,
    "-",
    ...px.map((p) => f(p.rss.after!.now)),
    "",
  ]);
  rows.push(["proxy peak RSS, VmHWM (MiB)", "-", ...px.map((p) => f(p.rss.after!.peak)), ""]);
  say(
    `baseline = straight to the mock upstream; ${o.N} sequential requests; ${o.ROUNDS} stream ` +
      `rounds; Deno ${Deno.version.deno}; ${navigator.hardwareConcurrency} CPUs`,
  );
  say("");
  const head = ["measure", ...paths.map((p) => p.name), "proxied vs baseline"];
  for (const r of [head, ...rows]) {
    const cells = r.slice(1, -1).map((c) => c.padStart(11)).join(" ");
    say(`${r[0]!.padEnd(40)} ${cells}   ${r[r.length - 1]}`);
  }
  say(`\nload average (1/5/15 min) at start, after the streams, at the end: ${loads.join(" | ")}`);
  say(`proxies counted: ${counts.join("; ")}`);
}

if (import.meta.main) {
  if (values.role === "upstream") await upstreamRole(values.dir!);
  else if (values.role === "proxy") await proxyRole(values.dir!, values.upstream!, values.tree!);
  else await client();
}
