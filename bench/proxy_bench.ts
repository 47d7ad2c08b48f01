/**
 * Proxy benchmark (run by hand): added latency per request, streaming throughput, and the
 * proxy's peak memory with 100 concurrent streams, each against the baseline "straight to
 * the mock upstream". The client, the mock upstream and the proxy are three processes (as
 * in real use: guest, remote service, host proxy); both paths are TLS with keep-alive from
 * the same client. The proxy path terminates TLS, injects the credential, scrubs the
 * response, reads SSE usage, counts, and re-encrypts.
 *
 *   deno run -A bench/proxy_bench.ts [--requests 1000] [--mb 64] [--streams 100]
 *
 * Targets: < 2 ms added per request at the median; >= 0.8x the direct streaming throughput.
 * The machine's cores are shared, so absolute numbers are noisy; compare the ratios.
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
    role: { type: "string", default: "client" },
    dir: { type: "string" },
    upstream: { type: "string" },
  },
});
const enc = new TextEncoder();

function say(text: string): void {
  // deno-lint-ignore no-console
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
  const me: Caller = { name: "bench", incarnation: "1", view: 1, address: "127.0.0.1", pins: {} };
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

async function client(): Promise<void> {
  const N = Number(values.requests);
  const MB = Number(values.mb);
  const STREAMS = Number(values.streams);
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
  const latency = async (port: number) => {
    for (let i = 0; i < 100; i++) await post(port);
    const out: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await post(port);
      out.push(performance.now() - t);
    }
    return out;
  };
  const throughput = async (port: number) => {
    await post(port, "?stream=4");
    const t = performance.now();
    const n = await post(port, `?stream=${MB}`);
    return n / 1048576 / ((performance.now() - t) / 1000);
  };
  const many = async (port: number) => {
    const t = performance.now();
    await Promise.all(Array.from({ length: STREAMS }, () => post(port, "?stream=2")));
    return (performance.now() - t) / 1000;
  };
  const rssBefore = peakRssMiB(px.child.pid);
  const [ld, lp] = [await latency(up.port), await latency(px.port)];
  const [td, tp] = [await throughput(up.port), await throughput(px.port)];
  const rssSmall = peakRssMiB(px.child.pid);
  const [wd, wp] = [await many(up.port), await many(px.port)];
  const rssMany = peakRssMiB(px.child.pid);
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
  const rows = [
    [
      "latency median (ms)",
      f(pct(ld, 0.5)),
      f(pct(lp, 0.5)),
      `+${f(pct(lp, 0.5) - pct(ld, 0.5))} ms (target < 2 ms)`,
    ],
    ["latency p90 (ms)", f(pct(ld, 0.9)), f(pct(lp, 0.9)), `+${f(pct(lp, 0.9) - pct(ld, 0.9))} ms`],
    [
      "latency p99 (ms)",
      f(pct(ld, 0.99)),
      f(pct(lp, 0.99)),
      `+${f(pct(lp, 0.99) - pct(ld, 0.99))} ms`,
    ],
    [`one ${MB} MiB SSE stream (MiB/s)`, f(td), f(tp), `${f(tp / td)}x (target >= 0.8x)`],
    [`${STREAMS} concurrent 2 MiB streams, wall (s)`, f(wd), f(wp), `${f(wp / wd)}x`],
  ];
  say(
    `baseline = straight to the mock upstream; ${N} sequential requests; Deno ${Deno.version.deno}\n`,
  );
  for (const r of [["measure", "direct", "proxied", "proxy vs baseline"], ...rows]) {
    say(`${r[0]!.padEnd(40)} ${r[1]!.padStart(9)} ${r[2]!.padStart(9)}   ${r[3]}`);
  }
  say(
    `\nproxy process peak RSS (VmHWM): ${f(rssBefore)} MiB idle, ${
      f(rssSmall)
    } MiB after the sequential runs, ` +
      `${f(rssMany)} MiB with ${STREAMS} concurrent streams (+${f(rssMany - rssSmall)} MiB)`,
  );
  say(`proxy counted: ${counts}`);
}

if (import.meta.main) {
  if (values.role === "upstream") await upstreamRole(values.dir!);
  else if (values.role === "proxy") await proxyRole(values.dir!, values.upstream!);
  else await client();
}
