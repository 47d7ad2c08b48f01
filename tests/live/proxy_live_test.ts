/**
 * The proxy against real containers on the Incus bridge: real bridge DNS (our own tagged
 * `raw.dnsmasq` block, removed afterwards), real TLS verified by the guest's CA store, real
 * address → instance mapping through the Incus client. The upstream is the loopback fake
 * (test-only override), and the intercepted names are test-only names, so nothing here
 * touches a running proxy's DNS block or leaves the host. Two containers, reused by every
 * step, always deleted.
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import {
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  ofLab,
  testName,
} from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { applyDns, bridgeGateway } from "../../proxy/host/dns.ts";
import { parseActivity, Policy, startProxy } from "../../proxy/mod.ts";
import { startFakeUpstream, STREAM_USAGE } from "../fakes/upstream.ts";
import { launchPinned, TRUSTED_STAMPS, until } from "./_pinned.ts";
import { updateAccountPins } from "../../mcp/mod.ts";

const REAL = "sk-ant-api03-LIVE-REAL-KEY-0123456789abcdef";
const BRIDGE = LIVE_BRIDGE; // the lab's (tests/helpers/lab.ts), never the user's
const dec = new TextDecoder();

async function sh(incus: IncusClient, name: string, script: string, timeoutMs = 120_000) {
  let r;
  try {
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  } catch (e) {
    // A busy incusd sometimes loses an exec websocket; the scripts here are safe to repeat.
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

function launch(incus: IncusClient, name: string): Promise<string> {
  // a trusted isx instance with a pinned NIC: the only kind the proxy gives the key to
  return launchPinned(incus, name, { stamps: { ...TRUSTED_STAMPS } });
}

/** Force-stops and deletes, retrying while a busy incusd refuses. */
async function remove(incus: IncusClient, name: string): Promise<void> {
  for (let attempt = 1; attempt <= 5; attempt++) {
    await incus.stopInstance(name, { step: `stop ${name}`, force: true }).catch(() => {});
    try {
      return await incus.deleteInstance(name, { step: `delete ${name}` });
    } catch (e) {
      if (e instanceof IsbError && e.code === "not_found") return;
      if (attempt === 5) {
        // deno-lint-ignore no-console
        console.error(`cleanup: could not delete ${name}: ${(e as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

async function sha256Hex(s: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test({
  name: "proxy serves real containers through bridge DNS and TLS and counts them apart",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const id = crypto.randomUUID().slice(0, 8);
    const domain = `api-${id}.anthropic.isx-test`;
    const tag = `isx-proxy-test-${id}`;
    const [a, b] = [testName("proxy"), testName("proxy")];
    const created: string[] = [];
    const dir = await Deno.makeTempDir();
    const up = startFakeUpstream();
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    let gateway = "";
    try {
      gateway = (await bridgeGateway(incus, BRIDGE))!;
      ok(gateway, "the bridge has an IPv4 address");
      const ca = await loadCa(`${dir}/ca`);
      const policy = new Policy(
        parseCredentials(`anthropic: { accounts: { main: { api_key: ${REAL} } } }`),
        {
          hosts: { anthropic: [domain] },
        },
      );
      registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
      await registry.start();
      proxy = await startProxy({
        listen: {
          tls: { hostname: gateway, port: 0 },
          forward: { hostname: gateway, port: 0 },
          health: [{ hostname: gateway, port: 0 }, { hostname: "127.0.0.1", port: 0 }],
        },
        policy,
        ca,
        clients: registry,
        upstreamOverrides: { [domain]: up.origin },
        allowLoopbackTargets: true,
      });
      await applyDns(incus, BRIDGE, { names: policy.dnsNames(), gateway, tag });
      const tls = proxy.addrs.tls.port;
      const url = `https://${domain}:${tls}/v1/messages`;

      created.push(a, b);
      await Promise.all([launch(incus, a), launch(incus, b)]);
      await t.step("setup: curl and the proxy CA in both guests", async () => {
        await Promise.all([a, b].map(async (n) => {
          await incus.pushFile(n, "/usr/local/share/ca-certificates/isx-proxy.crt", ca.certPem, {
            step: `push CA to ${n}`,
            mode: 0o644,
          });
          const r = await sh(
            incus,
            n,
            "update-ca-certificates >/dev/null && (command -v curl || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null))",
            300_000,
          );
          equal(r.code, 0, r.err);
          await until(`${domain} to resolve to the gateway in ${n}`, async () => {
            const g = await sh(incus, n, `getent hosts ${domain} || true`).catch(() => undefined);
            return g?.out.startsWith(gateway) ? true : undefined;
          });
        }));
      });

      await t.step(
        "a guest's placeholder reaches the upstream as the real key, never back",
        async () => {
          const r = await sh(
            incus,
            a,
            `curl -sS -H 'x-api-key: sk-ant-placeholder' -H 'content-type: application/json' -d '{"model":"m"}' ${url}`,
          );
          equal(r.code, 0, r.err);
          ok(r.out.includes('"echo":"***'), r.out);
          ok(!r.out.includes(REAL));
          equal(up.requests.at(-1)!.headers["x-api-key"], REAL);
        },
      );

      await t.step(
        "SSE usage is counted exactly and 50 concurrent streams from two guests apart",
        async () => {
          const before = ofLab(parseActivity(
            await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[1]!.port}/activity`)).json(),
          ));
          const loop =
            `for i in $(seq 25); do curl -sS -N -o /dev/null -w '%{http_code}\\n' -H 'x-api-key: sk-ant-placeholder' ` +
            `-d '{"stream":true}' ${url} & done; wait`;
          const [ra, rb] = await Promise.all([sh(incus, a, loop), sh(incus, b, loop)]);
          for (const r of [ra, rb]) {
            assertEquals(r.out.trim().split("\n"), Array(25).fill("200"), r.err);
          }
          const after = await until("both guests' calls to end", async () => {
            const w = ofLab(parseActivity(
              await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[1]!.port}/activity`))
                .json(),
            ));
            return w.instances[a]?.in_flight === 0 && w.instances[b]?.requests === 25 &&
                w.instances[b]?.in_flight === 0
              ? w
              : undefined;
          });
          const ea = after.instances[a]!;
          const eb = after.instances[b]!;
          equal(ea.requests - before.instances[a]!.requests, 25);
          equal(ea.input_tokens - before.instances[a]!.input_tokens, 25 * STREAM_USAGE.input);
          equal(ea.output_tokens - before.instances[a]!.output_tokens, 25 * STREAM_USAGE.output);
          equal(eb.cache_read_input_tokens, 25 * STREAM_USAGE.cacheRead);
          equal(eb.cache_creation_input_tokens, 25 * STREAM_USAGE.cacheCreation);
        },
      );

      await t.step(
        "a pin set on a running instance to a missing account fails closed, the other is served",
        async () => {
          const call = (n: string) =>
            sh(
              incus,
              n,
              `curl -sS -o /dev/null -w '%{http_code}' -H 'x-api-key: sk-ant-placeholder' -d '{}' ${url}`,
            );
          await updateAccountPins(incus, a, { claude: "nobody" });
          await until("the proxy to see A's pin", async () => {
            const r = await call(a);
            return r.out === "502" ? true : undefined;
          });
          const requests = up.requests.length;
          equal((await call(a)).out, "502");
          equal(up.requests.length, requests, "A's refused call reached no upstream");
          equal((await call(b)).out, "200");
          await updateAccountPins(incus, a, { claude: null });
          await until("the proxy to see A's pin removed", async () => {
            const r = await call(a);
            return r.out === "200" ? true : undefined;
          });
        },
      );

      await t.step("a request from A carrying B's instance secret is refused", async () => {
        for (const n of [a, b]) {
          const sha = await sha256Hex(`secret-${n}`);
          await incus.updateInstance(n, (i) => {
            i.config["user.incus-spawn.instance-secret-sha256"] = sha;
          }, { step: `stamp ${n}` });
        }
        await registry!.refresh();
        const curl = (secret: string) =>
          sh(
            incus,
            a,
            `curl -sS -o /dev/null -w '%{http_code}' -H 'x-isx-instance-secret: ${secret}' -d '{}' ${url}`,
          );
        equal((await curl(`secret-${b}`)).out, "403");
        equal((await curl(`secret-${a}`)).out, "200");
      });

      await t.step(
        "/activity and /accounts from inside an instance are 404; the host gets them",
        async () => {
          const health = proxy!.addrs.health[0]!.port;
          for (const path of ["/activity", "/accounts"]) {
            const r = await sh(
              incus,
              a,
              `curl -sS -o /dev/null -w '%{http_code}' http://${gateway}:${health}${path}`,
            );
            equal(r.out, "404", path);
          }
          const host = await fetch(`http://${gateway}:${health}/health`);
          equal((await host.json()).caFingerprint, ca.fingerprint);
          const accounts = await fetch(`http://${gateway}:${health}/accounts`);
          equal((await accounts.json()).anthropic.accounts[0].name, "main");
        },
      );

      await t.step("forward mode tunnels and counts a guest's other traffic", async () => {
        const before = ofLab(parseActivity(
          await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[1]!.port}/activity`)).json(),
        ))
          .instances[a]!;
        const r = await sh(
          incus,
          a,
          `curl -sS -o /dev/null -w '%{http_code}' -x http://${gateway}:${
            proxy!.addrs.forward.port
          } http://127.0.0.1:${up.port}/echo`,
        );
        equal(r.out, "200", `${r.out} ${r.err}`);
        const after = ofLab(parseActivity(
          await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[1]!.port}/activity`)).json(),
        ))
          .instances[a]!;
        equal(after.traffic_requests - before.traffic_requests, 1);
        equal(after.requests, before.requests);
        ok(after.traffic_bytes_received > before.traffic_bytes_received);
      });

      await t.step("a stopped and recreated instance name gets a new counting_since", async () => {
        const read = async () =>
          ofLab(parseActivity(
            await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[1]!.port}/activity`)).json(),
          ))
            .instances[b]!;
        const first = await read();
        await remove(incus, b);
        await launch(incus, b);
        await registry!.refresh();
        const again = await read();
        ok(again.counting_since > first.counting_since);
        equal(again.requests, 0);
      });
    } finally {
      await applyDns(incus, BRIDGE, { names: [], gateway, tag }).catch(() => {});
      for (const n of created) await remove(incus, n);
      await proxy?.close();
      await registry?.close();
      await up.close();
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
