// deno-lint-ignore-file no-console -- a role prints its port and counts for the client
/**
 * The proxy benchmark's other processes (proxy_bench.ts): the mock upstream and the proxy
 * under test, each a role of proxy_bench.ts run in a process of its own, and the spawning of
 * them. Apart from the client's measuring and reporting because these are what runs on the
 * other side of the wire; the proxy role loads the measured tree's modules by path at run
 * time (this file imports types only), so a proxy holds only its own tree's code.
 *
 * @module
 */

import type { Caller, CallerLookup } from "../proxy/callers/clients.ts";

const enc = new TextEncoder();
const HERE = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

function say(text: string): void {
  console.log(text);
}

/** Mock upstream: small JSON answers, or `?stream=MiB` of SSE with usage at both ends. */
export async function upstreamRole(dir: string): Promise<void> {
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

/**
 * The proxy of the tree `tree`, with "localhost" as the intercepted Anthropic host and the
 * mock as upstream, having loaded what `isx proxy run` loads in that tree.
 */
export async function proxyRole(dir: string, upstreamPort: string, tree: string): Promise<void> {
  const at = (f: string) => import(`file://${tree}/${f}`);
  // the module of this layout, else of the flat proxy/ of older trees (a "before" variant)
  const either = (now: string, flat: string) => at(now).catch(() => at(flat));
  const { signerFromPem } = await either("proxy/tls/ca.ts", "proxy/ca.ts");
  const { parseCredentials } = await either("proxy/config/credentials.ts", "proxy/credentials.ts");
  const { Policy, startProxy } = await at("proxy/mod.ts");
  let run = "cli/proxy_run.ts";
  await Deno.stat(`${tree}/${run}`).catch(() => (run = "cli/proxy.ts"));
  await at("cli/mod.ts"), await at(run);
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
      { hosts: { anthropic: ["localhost"] } },
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
  say(JSON.stringify({ requests: e.requests, output_tokens: e.output_tokens }));
  await proxy.close();
}

/** A spawned role: its process, the port it printed, and its further output lines. */
export interface Role {
  child: Deno.ChildProcess;
  port: number;
  lines: ReadableStreamDefaultReader<string>;
}

/** Runs proxy_bench.ts with `args` (a role) in a process of its own (`denoFlags` before the
 * script, e.g. `--cpu-prof`); resolves with its port. */
export async function spawnRole(
  args: string[],
  v8Flags = "",
  denoFlags: string[] = [],
): Promise<Role> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...(v8Flags ? [`--v8-flags=${v8Flags}`] : []),
      ...denoFlags,
      "--config",
      `${HERE}/deno.json`,
      new URL("./proxy_bench.ts", import.meta.url).pathname,
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
