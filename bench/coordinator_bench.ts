// deno-lint-ignore-file no-console
/**
 * A coordinator's `isx mcp` over HTTP through the proxy against a host agent's over stdio
 * (issue 20's figures), on real Incus:
 *
 * 1. `tools/call` of `list_instances`: from inside a coordinator (curl, one kept-alive
 *    connection, `https://mcp.isx.internal/mcp` on the proxy's gateway port 443, answered by
 *    the proxy's `isx mcp --caller-instance` child) against the same call of a host
 *    `isx mcp` over stdio (target ≤ 1.3x);
 * 2. `exec` of `true` in a worker the coordinator made, against the host session's `exec` in
 *    one it made.
 *
 * Each side is timed where its client is: curl's `time_total` per request inside the
 * coordinator, the line client's round trip on the host. Run: `deno run -A
 * bench/coordinator_bench.ts [--calls 30]`. Needs a built tpl-minimal; makes its own bridge
 * (`icoordb…`), proxy (in this process), CA, isx home and instances (`t-coordb-…`, removed).
 *
 * @module
 */

import { hasCode } from "../rpc/base.ts";
import { parseArgs } from "node:util";
import { execRecorded, readStamps } from "../mcp/mod.ts";
import { ClientRegistry, incusSource, loadCa, MCP_HOST, Policy, startProxy } from "../proxy/mod.ts";
import { emptyCredentials } from "../proxy/config/credentials.ts";
import { applyDns } from "../proxy/host/dns.ts";
import { sha256Hex } from "../rpc/base.ts";
import { contextFrom } from "../cli/permissions.ts";
import { mcpChildSpec } from "../cli/mcp_child.ts";
import type { CliContext } from "../cli/command.ts";
import { newGrant } from "../mcp/instances/caller_grant.ts";
import { LIVE_SOCKET, liveIncus, removeInstance, testName } from "../tests/helpers/live.ts";
import { bridgeCidr, pickAddress, pinnedNic, takenAddresses } from "../mcp/instances/static_ip.ts";
import { makeHome, mcpCommand } from "../tests/helpers/mcp.ts";
import { ROOT, spawnProgram } from "../tests/helpers/spawn.ts";

const { values } = parseArgs({ options: { calls: { type: "string", default: "30" } } });
const N = Number(values.calls);
const TPL = "tpl-minimal";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const load = () => Deno.loadavg().map((x) => x.toFixed(2)).join(" ");
const incus = liveIncus();
const made: string[] = [];

const bridge = `icoordb${crypto.randomUUID().slice(0, 5)}`;
const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
const gateway = `${subnet}.1`;
await incus.createNetwork({
  name: bridge,
  config: { "ipv4.address": `${gateway}/24`, "ipv4.nat": "false", "ipv6.address": "none" },
}, { step: `create ${bridge}` });
const home = makeHome({ mcp: `templates: [${TPL}]\nmax-instances: 5\n` });
const healthPort = 20000 + Math.floor(Math.random() * 20000);
Deno.writeTextFileSync(
  `${home.configDir}/config.yaml`,
  `proxy:\n  bridge: ${bridge}\n  ports: { health: ${healthPort} }\n`,
);
const ca = await loadCa(`${home.stateDir}/ca`);
const registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
await registry.start();
const perm = contextFrom((k) => home.env[k], {
  cwd: home.dir,
  uid: Deno.uid() ?? 0,
  programDir: ROOT,
  execPath: Deno.execPath(),
  socket: LIVE_SOCKET,
});
const ctx = {
  prog: "isx",
  global: { socket: LIVE_SOCKET },
  perm,
  env: { DENO_DIR: home.env.DENO_DIR! },
} as unknown as CliContext;
const policy = new Policy(emptyCredentials(), { domains: [MCP_HOST] });
const proxy = await startProxy({
  listen: {
    tls: { hostname: gateway, port: 443 },
    forward: { hostname: gateway, port: 0 },
    health: [{ hostname: "127.0.0.1", port: healthPort }],
  },
  policy,
  ca,
  clients: registry,
  mcp: { spec: mcpChildSpec(ctx) },
});
const host = spawnProgram(["mcp"], { env: mcpCommand(home).env, prog: "isx", cwd: home.dir });

let hostId = 0;
async function hostCall(method: string, params: Record<string, unknown> = {}) {
  const my = ++hostId;
  await host.send({ jsonrpc: "2.0", id: my, method, params });
  for (;;) {
    const m = await host.readJson(600_000);
    if (m.id === my) return m.result as Record<string, unknown>;
  }
}

try {
  await applyDns(incus, bridge, { names: [MCP_HOST], gateway });
  const coord = testName("coordb");
  made.push(coord);
  const secret = crypto.randomUUID();
  const address = pickAddress(await bridgeCidr(incus, bridge), await takenAddresses(incus, bridge));
  await incus.createInstance({
    name: coord,
    source: { type: "image", alias: "dev-base" }, // curl (scripts/host-setup.sh)
    config: {
      "user.incus-spawn.type": "instance",
      "user.incus-spawn.trusted": "true",
      "user.incus-spawn.build-id": "bench",
      "user.incus-spawn.static-ip": address,
      "user.incus-spawn.instance-secret-sha256": sha256Hex(secret),
      "user.incus-spawn.mcp-caller": newGrant(),
    },
    devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: bridge }, address) },
    start: true,
  }, { step: `launch ${coord}` });
  await incus.pushFile(coord, "/usr/local/share/ca-certificates/isx-b.crt", ca.certPem, {
    step: "push CA",
    mode: 0o644,
  });
  await execRecorded(incus, coord, ["mkdir", "-p", "/run/isx"], { step: "mkdir" });
  await incus.pushFile(coord, "/run/isx/instance-secret", secret, { step: "secret", mode: 0o400 });
  await execRecorded(incus, coord, [
    "bash",
    "-c",
    `update-ca-certificates >/dev/null 2>&1; for i in $(seq 120); do getent hosts ${MCP_HOST} && exit 0; sleep 0.5; done`,
  ], { step: "CA, DNS" });
  await registry.refresh();
  // One curl process: initialize, then the calls, each its own request on one connection.
  const curl = async (
    calls: Record<string, unknown>[],
  ): Promise<{ times: number[]; out: string }> => {
    const script = `
set -e
H=(-sS --cacert /etc/ssl/certs/ca-certificates.crt -H "X-Isx-Instance-Secret: $(cat /run/isx/instance-secret)" -H "content-type: application/json" -H "accept: application/json")
curl "\${H[@]}" -D /tmp/h -o /tmp/init -d "$INIT" https://${MCP_HOST}/mcp
sid=$(grep -i '^mcp-session-id:' /tmp/h | tr -d '\\r' | cut -d' ' -f2)
args=()
i=0
while IFS= read -r line; do
  [ $i -gt 0 ] && args+=(--next)
  args+=("\${H[@]}" -H "mcp-session-id: $sid" -o /tmp/out-$i -w '%{time_total}\\n' -d "$line" https://${MCP_HOST}/mcp)
  i=$((i+1))
done <<< "$CALLS"
curl "\${args[@]}"
cat /tmp/out-0
`;
    const r = await execRecorded(incus, coord, ["bash", "-c", script], {
      step: "curl calls",
      env: {
        INIT: JSON.stringify({
          jsonrpc: "2.0",
          id: 0,
          method: "initialize",
          params: {
            protocolVersion: "2025-11-25",
            capabilities: {},
            clientInfo: { name: "bench" },
          },
        }),
        CALLS: calls.map((c) => JSON.stringify(c)).join("\n"),
      },
    });
    if (r.exitCode !== 0) throw new Error(`curl: ${r.stdout}${r.stderr}`);
    const lines = r.stdout.trim().split("\n");
    const times = lines.slice(0, calls.length).map((l) => Number(l) * 1000);
    return { times, out: lines.slice(calls.length).join("\n") };
  };
  const call = (i: number, name: string, args: Record<string, unknown> = {}) => ({
    jsonrpc: "2.0",
    id: i + 1,
    method: "tools/call",
    params: { name, arguments: args },
  });
  // workers: one per side
  const made1 = await curl([call(0, "create_instance", { template: TPL, name_hint: "coordb" })]);
  const worker = JSON.parse(made1.out).result.structuredContent.instance as string;
  made.push(worker);
  await hostCall("initialize", {
    protocolVersion: "2025-11-25",
    capabilities: {},
    clientInfo: { name: "bench" },
  });
  const hc = await hostCall("tools/call", {
    name: "create_instance",
    arguments: { template: TPL, name_hint: "coordb" },
  });
  const hostWorker = String((hc.structuredContent as Record<string, unknown>).instance);
  made.push(hostWorker);
  const before = load();
  const http = {
    list: [] as number[],
    exec: [] as number[],
  };
  const stdio = { list: [] as number[], exec: [] as number[] };
  // interleaved in rounds of 5 so host noise hits both alike
  for (let round = 0; round < Math.ceil(N / 5); round++) {
    const list = await curl(Array.from({ length: 5 }, (_, i) => call(i, "list_instances")));
    http.list.push(...list.times.slice(1)); // the first pays for the connection's warm-up
    const ex = await curl(
      Array.from({ length: 5 }, (_, i) => call(i, "exec", { instance: worker, command: "true" })),
    );
    http.exec.push(...ex.times.slice(1));
    for (let i = 0; i < 4; i++) {
      let t0 = performance.now();
      await hostCall("tools/call", { name: "list_instances", arguments: {} });
      stdio.list.push(performance.now() - t0);
      t0 = performance.now();
      await hostCall("tools/call", {
        name: "exec",
        arguments: { instance: hostWorker, command: "true" },
      });
      stdio.exec.push(performance.now() - t0);
    }
  }
  const f = (x: number) => `${x.toFixed(1)} ms`;
  const [hl, sl, he, se] = [
    median(http.list),
    median(stdio.list),
    median(http.exec),
    median(
      stdio.exec,
    ),
  ];
  console.log(`load before ${before}, after ${load()}; ${http.list.length} calls a side`);
  console.log(
    `list_instances: coordinator over HTTP ${f(hl)}, host stdio ${f(sl)}: ${
      (hl / sl).toFixed(2)
    }x (target ≤ 1.3x)`,
  );
  console.log(
    `exec true:      coordinator over HTTP ${f(he)}, host stdio ${f(se)}: ${(he / se).toFixed(2)}x`,
  );
  void readStamps;
} finally {
  await host.closeStdin().catch(() => {});
  await host.wait(60_000).catch(() => {});
  await proxy.close();
  await registry.close();
  for (const i of await incus.listInstances()) {
    if (
      readStamps(i.config)["mcp-owner"]?.endsWith(`:${home.stateDir}`) && !made.includes(i.name)
    ) {
      made.push(i.name);
    }
  }
  for (const n of made) await removeInstance(incus, n).catch(() => {});
  // a just-deleted instance may hold the bridge a moment longer
  for (let i = 0; i < 30; i++) {
    const gone = await incus.deleteNetwork(bridge, { step: `delete ${bridge}` }).then(
      () => true,
      (e) => hasCode(e, "not_found"),
    );
    if (gone) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  incus.close();
}
