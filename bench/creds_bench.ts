// deno-lint-ignore-file no-console
/**
 * What live credentials cost (issue 23):
 *
 * - reload latency: from an editor-style write of credentials.yaml (new file renamed over the
 *   old) to the new policy generation in force, with the real LiveReload poll; the target is
 *   the 2 s, printed as a ratio of it;
 * - the hot path: sequential requests through the real relay on loopback (fake upstream),
 *   a literal key (baseline) against a command-sourced key served from its cache.
 *
 * Run: `deno run -A bench/creds_bench.ts [--iterations 20] [--requests 300]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import {
  CommandSources,
  loadCredentials,
  parseCredentials,
  Policy,
  type RunCommand,
  startProxy,
  watchCredentials,
} from "../proxy/mod.ts";
import { setLogSink } from "../rpc/mod.ts";
import { guestRequest, PortCallers, startFakeUpstream } from "../tests/fakes/upstream.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "20" },
    requests: { type: "string", default: "300" },
  },
});
setLogSink(() => {});
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!;
const dir = await Deno.makeTempDir({ prefix: "creds-bench-" });

// reload latency
{
  const path = `${dir}/credentials.yaml`;
  const write = async (k: string) => {
    await Deno.writeTextFile(`${path}.tmp`, `anthropic: { accounts: { m: { api_key: ${k} } } }\n`, {
      mode: 0o600,
    });
    await Deno.rename(`${path}.tmp`, path);
  };
  await write("sk-ant-0");
  const policy = new Policy(await loadCredentials(path));
  const reload = await watchCredentials({
    credentialsPath: path,
    configPath: `${dir}/config.yaml`,
    policy,
    sources: new CommandSources(),
    policyConfig: () => ({}),
  });
  const ms: number[] = [];
  for (let i = 1; i <= Number(values.iterations); i++) {
    const gen = policy.generation;
    const t0 = performance.now();
    await write(`sk-ant-${i}`);
    while (policy.generation === gen) await new Promise((r) => setTimeout(r, 5));
    ms.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, Math.random() * 500)); // not in step with the poll
  }
  await reload.close();
  const [med, p90, max] = [pct(ms, 0.5), pct(ms, 0.9), Math.max(...ms)];
  console.log(
    `reload latency: median ${med.toFixed(0)} ms, p90 ${p90.toFixed(0)} ms, max ${
      max.toFixed(0)
    } ms; max / 2 s target = ${(max / 2000).toFixed(2)}`,
  );
}

// hot path
const A: Caller = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
async function rate(creds: string): Promise<number> {
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const callers = new PortCallers();
  callers.instances = [A];
  const run: RunCommand = () =>
    Promise.resolve({ code: 0, stdout: new TextEncoder().encode("sk-ant-FROM-COMMAND") });
  const proxy = await startProxy({
    listen: {
      tls: { hostname: "127.0.0.1", port: 0 },
      forward: { hostname: "127.0.0.1", port: 0 },
      health: [],
    },
    policy: new Policy(parseCredentials(creds)),
    ca,
    clients: callers,
    sources: new CommandSources({ run }),
    upstreamOverrides: { "api.anthropic.com": up.origin },
  });
  const one = () =>
    guestRequest(callers, {
      port: proxy.addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: ca.certPem,
      caller: A,
      method: "POST",
      path: "/v1/messages",
      headers: { "x-api-key": "sk-ant-placeholder" },
      body: "{}",
    });
  for (let i = 0; i < 20; i++) await one(); // warm up
  const n = Number(values.requests);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) if ((await one()).status !== 200) throw new TypeError("not 200");
  const per = (performance.now() - t0) / n;
  await proxy.close();
  await up.close();
  return per;
}
const literal = await rate("anthropic: { accounts: { m: { api_key: sk-ant-LITERAL } } }");
const command = await rate(
  "anthropic: { accounts: { m: { api_key: { command: [x], ttl: 1h } } } }",
);
console.log(
  `per request (new TLS connection each): literal key ${literal.toFixed(2)} ms (baseline), ` +
    `command key ${command.toFixed(2)} ms; ratio ${(command / literal).toFixed(2)}`,
);
await Deno.remove(dir, { recursive: true });
