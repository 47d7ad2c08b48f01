// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Proxy benchmark (run by hand): added latency per request, streaming throughput, and the
 * proxy's peak memory with 100 concurrent streams, each against the baseline "straight to
 * the mock upstream". The client, the mock upstream and the proxy are three processes (as
 * in real use: guest, remote service, host proxy); both paths are TLS with keep-alive from
 * the same client (`fetch`, one HTTP client). The proxy path terminates TLS, injects the
 * credential, scrubs the response of the real key, reads SSE usage, counts, and
 * re-encrypts.
 *
 *   deno run -A bench/proxy_bench.ts [--requests 1000] [--mb 64] [--rounds 5] [--streams 100]
 *
 * Targets: < 2 ms added per request at the median; >= 0.8x the direct streaming throughput.
 * The paths alternate (latency in ten blocks, streams round by round) so a change in the
 * machine's load hits both; the stream ratio is of the medians. Each round also records the
 * CPU milliseconds per MiB of every process, which other load barely changes, and from them
 * an estimate of the rates with a core per process: on 2 shared cores the measured ratio is
 * bounded by CPU. The load average is printed with the results.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createCa, signerFromPem } from "../proxy/ca.ts";
import type { Caller, CallerLookup } from "../proxy/clients.ts";
import { parseCredentials } from "../proxy/credentials.ts";
import { Policy, startProxy } from "../proxy/mod.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    requests: { type: "string", default: "1000" },
    mb: { type: "string", default: "64" },
    streams: { type: "string", default: "100" },
    rounds: { type: "string", default: "5" },
    role: { type: "string", default: "client" },
    dir: { type: "string" },
    upstream: { type: "string" },
  },
});
const enc = new TextEncoder();

function say(text: string): void {
  console.log(text);
}

/** Mock upstream: small JSON answers, or `?stream=MiB` of SSE with usage at both ends. */
async function upstreamRole(dir: string): Promise<void> {
  const leaf = JSON.parse(await Deno.readTextFile(`${dir}/leaf.json`));
  const line = `data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"${
    "x".repeat(200)
  }"}}\n\n`;
  const chunk = enc.encode(line.repeat(Math.floor(65536 / line.length)));
  const first = enc.encode(
    'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}\n\n',
  );
  const last = enc.encode(
    'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":99}}\n\n',
  );
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: leaf.certPem,
    key: leaf.keyPem,
    onListen() {},
  }, async (req) => {
    const url = new URL(req.url);
    await req.body?.cancel();
    const mib = Number(url.searchParams.get("stream") ?? 0);
    if (!mib) {
      return Response.json({
        id: "m",
        content: [{ type: "text", text: "ok" }],
        usage: { input_tokens: 3, output_tokens: 4 },
      });
    }
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      start: (ctl) => ctl.enqueue(first),
      pull(ctl) {
        if (sent >= mib * 1048576) {
          ctl.enqueue(last);
          return ctl.close();
        }
        sent += chunk.length;
        ctl.enqueue(chunk);
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  say(String(server.addr.port));
  await server.finished;
}

/** The proxy, with "localhost" as the intercepted Anthropic host and the mock as upstream. */
async function proxyRole(dir: string, upstreamPort: string): Promise<void> {
  const ca = JSON.parse(await Deno.readTextFile(`${dir}/ca.json`));
  const signer = await signerFromPem(ca.certPem, ca.keyPem);
  const me: Caller = {
    name: "bench",
    incarnation: "1",
    view: 1,
    address: "127.0.0.1",
    pins: {},
    grant: "all",
  };
  const everyone: CallerLookup = { identify: () => Promise.resolve(me), known: () => [me] };
  const proxy = await startProxy({
    listen: {
      tls: { hostname: "127.0.0.1", port: 0 },
      forward: { hostname: "127.0.0.1", port: 0 },
      health: [],
    },
    policy: new Policy(
      parseCredentials("anthropic: { accounts: { a: { api_key: sk-ant-api03-BENCH-REAL-KEY } } }"),
      {
        hosts: { anthropic: ["localhost"] },
      },
    ),
    ca: signer,
    clients: everyone,
    upstreamOverrides: { localhost: `https://localhost:${upstreamPort}` },
    httpClient: Deno.createHttpClient({ caCerts: [ca.certPem] }),
    upstreamCaCerts: [ca.certPem],
  });
  say(String(proxy.addrs.tls.port));
  // Reports the counts when asked on stdin, then exits.
  for await (const _ of Deno.stdin.readable) break;
  const e = proxy.counter.snapshot().instances.bench!;
  say(
    JSON.stringify({
      requests: e.requests,
      output_tokens: e.output_tokens,
      in_flight: e.in_flight,
    }),
  );
  await proxy.close();
}

async function spawnRole(
  args: string[],
): Promise<{ child: Deno.ChildProcess; port: number; lines: ReadableStreamDefaultReader<string> }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      new URL("../deno.json", import.meta.url).pathname,
      new URL(import.meta.url).pathname,
      ...args,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const { value } = await lines.read();
  return { child, port: Number(value!.trim()), lines };
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
}

function peakRssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
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

async function client(): Promise<void> {
  const N = Number(values.requests);
  const MB = Number(values.mb);
  const STREAMS = Number(values.streams);
  const ROUNDS = Number(values.rounds);
  const dir = await Deno.makeTempDir();
  const caPem = await createCa();
  const leaf = await (await signerFromPem(caPem.certPem, caPem.keyPem)).issueLeaf(["localhost"]);
  await Deno.writeTextFile(`${dir}/ca.json`, JSON.stringify(caPem), { mode: 0o600 });
  await Deno.writeTextFile(`${dir}/leaf.json`, JSON.stringify(leaf), { mode: 0o600 });
  const up = await spawnRole(["--role", "upstream", "--dir", dir]);
  const px = await spawnRole(["--role", "proxy", "--dir", dir, "--upstream", String(up.port)]);
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
  // Both paths alternate in blocks, so a change in the machine's load hits both alike.
  const ld: number[] = [];
  const lp: number[] = [];
  for (const port of [up.port, px.port]) for (let i = 0; i < 100; i++) await post(port);
  for (let b = 0; b < 10; b++) {
    for (
      const [port, out] of b % 2
        ? [[px.port, lp], [up.port, ld]] as const
        : [[up.port, ld], [px.port, lp]] as const
    ) {
      for (let i = 0; i < N / 10; i++) {
        const t = performance.now();
        await post(port);
        out.push(performance.now() - t);
      }
    }
  }
  // CPU per MiB of each process on one stream: the client, the upstream, the proxy.
  const throughput = async (port: number) => {
    await post(port, "?stream=4");
    const pids = [up.child.pid, px.child.pid];
    const c0 = [cpuSeconds("self"), ...pids.map(cpuSeconds)];
    const t = performance.now();
    const mib = (await post(port, `?stream=${MB}`)) / 1048576;
    const s = (performance.now() - t) / 1000;
    const cpu = [cpuSeconds("self"), ...pids.map(cpuSeconds)].map((c, i) =>
      (c - c0[i]!) * 1000 / mib
    );
    return { rate: mib / s, cpu };
  };
  const td: Awaited<ReturnType<typeof throughput>>[] = [];
  const tp: typeof td = [];
  const loads = [loadavg()];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2) tp.push(await throughput(px.port)), td.push(await throughput(up.port));
    else td.push(await throughput(up.port)), tp.push(await throughput(px.port));
  }
  loads.push(loadavg());
  const rssSmall = peakRssMiB(px.child.pid);
  const many = async (port: number) => {
    const t = performance.now();
    await Promise.all(Array.from({ length: STREAMS }, () => post(port, "?stream=2")));
    return (performance.now() - t) / 1000;
  };
  const [wd, wp] = [await many(up.port), await many(px.port)];
  const rssMany = peakRssMiB(px.child.pid);
  loads.push(loadavg());
  const w = px.child.stdin.getWriter();
  await w.write(enc.encode("report\n"));
  await w.close();
  const counts = (await px.lines.read()).value?.trim();
  await px.child.status;
  up.child.kill();
  await up.child.status;
  await up.child.stdin.close();
  await up.lines.cancel();
  await px.lines.cancel();
  http.close();
  await Deno.remove(dir, { recursive: true });

  const f = (x: number) => x.toFixed(2);
  const [rd, rp] = [median(td.map((t) => t.rate)), median(tp.map((t) => t.rate))];
  const cpuOf = (ts: typeof td, i: number) => f(median(ts.map((t) => t.cpu[i]!)));
  const busiest = (ts: typeof td) =>
    Math.max(
      ...ts[0]!.cpu.map((_, i) => median(ts.map((t) => t.cpu[i]!))).filter((_, i) =>
        ts === tp || i < 2
      ),
    );
  const rows = [
    ...[0.5, 0.9, 0.99].map((q) => [
      `latency p${q * 100} (ms)`,
      f(pct(ld, q)),
      f(pct(lp, q)),
      `+${f(pct(lp, q) - pct(ld, q))} ms${q === 0.5 ? " (target < 2 ms)" : ""}`,
    ]),
    [`one ${MB} MiB SSE stream (MiB/s, median)`, f(rd), f(rp), `${f(rp / rd)}x (target >= 0.8x)`],
    [
      "  per round",
      td.map((t) => t.rate.toFixed(0)).join("/"),
      tp.map((t) => t.rate.toFixed(0)).join("/"),
      `${tp.map((t, i) => f(t.rate / td[i]!.rate)).join(" ")} (median ${
        f(median(tp.map((t, i) => t.rate / td[i]!.rate)))
      })`,
    ],
    ["  client CPU (ms per MiB, median)", cpuOf(td, 0), cpuOf(tp, 0), ""],
    ["  upstream CPU (ms per MiB, median)", cpuOf(td, 1), cpuOf(tp, 1), ""],
    ["  proxy CPU (ms per MiB, median)", "-", cpuOf(tp, 2), ""],
    // Not a measurement: the rate if every process had a core of its own (the busiest bounds it).
    [
      "  estimate, a core per process (MiB/s)",
      f(1000 / busiest(td)),
      f(1000 / busiest(tp)),
      `${f(busiest(td) / busiest(tp))}x`,
    ],
    [`${STREAMS} concurrent 2 MiB streams, wall (s)`, f(wd), f(wp), `${f(wp / wd)}x`],
  ];
  say(
    `baseline = straight to the mock upstream; ${N} sequential requests; ${ROUNDS} stream rounds; ` +
      `Deno ${Deno.version.deno}; ${navigator.hardwareConcurrency} CPUs\n`,
  );
  for (const r of [["measure", "direct", "proxied", "proxy vs baseline"], ...rows]) {
    say(`${r[0]!.padEnd(40)} ${r[1]!.padStart(11)} ${r[2]!.padStart(11)}   ${r[3]}`);
  }
  say(
    `\nproxy process peak RSS (VmHWM): ${f(rssSmall)} MiB after the sequential runs, ` +
      `${f(rssMany)} MiB with ${STREAMS} concurrent streams (+${f(rssMany - rssSmall)} MiB)`,
  );
  say(`load average (1/5/15 min) at start, after the streams, at the end: ${loads.join(" | ")}`);
  say(`proxy counted: ${counts}`);
}

if (import.meta.main) {
  if (values.role === "upstream") await upstreamRole(values.dir!);
  else if (values.role === "proxy") await proxyRole(values.dir!, values.upstream!);
  else await client();
}
