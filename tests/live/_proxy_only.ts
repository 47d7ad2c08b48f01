/**
 * The proxy-only checks of tests/live/templates_test.ts, from inside a real proxy-only
 * branch: its address is on the lab's proxy-only bridge (tests/helpers/lab.ts; never the
 * user's `isxproxy0`, whose gateway the user's proxy serves), its proxy settings name that bridge's
 * gateway, an intercepted (test-only) name resolves to the gateway, a real proxy serving the
 * gateway (`startProxy` + `addListen` on 443/3128, upstream a loopback stand-in) answers it
 * both directly and through `HTTPS_PROXY`, and a host listener on every address (which a
 * full instance reaches) is NOT reachable from it on any gateway or host address, nor is the
 * full branch, nor (port isolation) does a second proxy-only instance reach the first. The
 * test's DNS block is removed afterwards; the bridge is deleted by {@link removeBridgeIfMade}
 * once the test's instances are gone, if the test made it.
 */

import assert from "node:assert/strict";
import { type IncusClient, isNotFound } from "../../rpc/mod.ts";
import { execRecorded, KEY_ISX_ROLE } from "../../mcp/mod.ts";
import { LIVE_BRIDGE, LIVE_PROXY_ONLY_BRIDGE } from "../helpers/live.ts";
import { ClientRegistry, incusSource, loadCa, Policy, startProxy } from "../../proxy/mod.ts";
import { emptyCredentials } from "../../proxy/config/credentials.ts";
import { applyDns } from "../../proxy/host/dns.ts";
import type { IsxHome } from "../templates_env.ts";
import { loopbackListen } from "../helpers/proxy.ts";

const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };

/** Whether the lab's proxy-only bridge existed before the test (then it is never deleted). */
export async function bridgeExists(c: IncusClient): Promise<boolean> {
  try {
    await c.getNetwork(LIVE_PROXY_ONLY_BRIDGE);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

/** Deletes the proxy-only bridge and its ACL if the test made them and nothing uses them. */
export async function removeBridgeIfMade(c: IncusClient, existed: boolean): Promise<void> {
  if (existed) return;
  try {
    const net = (await c.getNetwork(LIVE_PROXY_ONLY_BRIDGE)).value;
    if (net.config[KEY_ISX_ROLE] !== "proxy-only") return;
    if ((net.used_by ?? []).length > 0) return; // someone else's proxy-only instance
    await c.deleteNetwork(LIVE_PROXY_ONLY_BRIDGE, { step: "cleanup" });
    await c.deleteNetworkAcl(`isx-proxy-only-${LIVE_PROXY_ONLY_BRIDGE}`, { step: "cleanup" });
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
}

async function sh(c: IncusClient, name: string, script: string, user = AGENT) {
  return await execRecorded(c, name, ["bash", "-lc", script], { step: "test", user });
}

/** Branches `name` proxy-only from `leaf` and checks it from inside. */
export async function proxyOnlyChecks(
  c: IncusClient,
  o: { home: IsxHome; leaf: string; full: string; name: string; peer: string },
): Promise<void> {
  const r = await o.home.isx([
    "branch",
    o.name,
    "--from",
    o.leaf,
    "--network",
    "proxy-only",
    "--no-preflight",
  ]);
  assert.equal(r.code, 0, r.stderr);
  const net = (await c.getNetwork(LIVE_PROXY_ONLY_BRIDGE)).value;
  assert.equal(net.config[KEY_ISX_ROLE], "proxy-only");
  assert.equal(net.config["ipv4.nat"], "false");
  const gw2 = net.config["ipv4.address"]!.split("/")[0]!;
  const gw1 = (await c.getNetwork(LIVE_BRIDGE)).value.config["ipv4.address"]!.split("/")[0]!;
  const ipOf = async (n: string) =>
    (await c.getInstanceState(n)).network?.eth0?.addresses.find((a) => a.family === "inet")
      ?.address;
  const [ipPo, ipFull] = [await ipOf(o.name), await ipOf(o.full)];
  assert.ok(ipPo, "the proxy-only branch has an address");
  assert.equal(ipPo.split(".").slice(0, 3).join("."), gw2.split(".").slice(0, 3).join("."));
  const env = await sh(c, o.name, "echo $HTTPS_PROXY");
  assert.equal(env.stdout, `http://${gw2}:3128\n`, "proxy settings name this bridge's gateway");

  const id = crypto.randomUUID().slice(0, 8);
  const domain = `mock-${id}.isx-test`;
  const tag = `isx-proxy-test-${id}`;
  const ac = new AbortController();
  const origin = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    () => new Response("via-proxy\n"),
  );
  // a host listener on every address: full instances reach it, proxy-only ones must not
  const stray = Deno.serve(
    { hostname: "0.0.0.0", port: 0, signal: ac.signal, onListen() {} },
    () => new Response("stray\n"),
  );
  const registry = new ClientRegistry(incusSource(c), { now: Date.now, minRefreshMs: 200 });
  let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
  try {
    await registry.start();
    const policy = new Policy(emptyCredentials(), { domains: [domain] });
    proxy = await startProxy({
      listen: loopbackListen(),
      policy,
      ca: await loadCa(`${o.home.stateDir}/ca`),
      clients: registry,
      upstreamOverrides: { [domain]: `http://127.0.0.1:${origin.addr.port}` },
    });
    await proxy.addListen({ hostname: gw2, tls: 443, forward: 3128 });
    await applyDns(c, LIVE_PROXY_ONLY_BRIDGE, { names: policy.dnsNames(), gateway: gw2, tag });

    const P = stray.addr.port;
    const control = await sh(c, o.full, `curl -sS --noproxy '*' --max-time 5 http://${gw1}:${P}/`);
    assert.equal(control.stdout, "stray\n", `a full instance reaches the host listener`);

    let dns = "";
    for (let i = 0; i < 40 && !dns.startsWith(gw2); i++) {
      dns = (await sh(c, o.name, `getent hosts ${domain} || true`)).stdout;
      if (!dns.startsWith(gw2)) await new Promise((res) => setTimeout(res, 250));
    }
    assert.match(dns, new RegExp(`^${gw2.replaceAll(".", "\\.")}\\s`), "DNS answers the gateway");

    const direct = await sh(c, o.name, `curl -sS --noproxy '*' --max-time 10 https://${domain}/`);
    assert.equal(direct.stdout, "via-proxy\n", `direct to the gateway's 443: ${direct.stderr}`);
    const viaEnv = await sh(c, o.name, `curl -sS --max-time 10 https://${domain}/`);
    assert.equal(viaEnv.stdout, "via-proxy\n", `through HTTPS_PROXY (3128): ${viaEnv.stderr}`);

    const hostAddrs = Deno.networkInterfaces().filter((i) =>
      i.family === "IPv4" && !i.address.startsWith("127.") && i.address !== gw2 &&
      i.address !== gw1
    ).map((i) => i.address).slice(0, 2);
    const targets = [
      `${gw2}:${P}`,
      `${gw2}:22`,
      `${gw2}:18080`,
      `${gw1}:${P}`,
      `${gw1}:22`,
      ...hostAddrs.map((a) => `${a}:${P}`),
      ...(ipFull ? [`${ipFull}:22`] : []),
    ];
    const probe = targets.map((t) =>
      `if timeout 4 bash -c 'exec 3<>/dev/tcp/${t.replace(":", "/")}' 2>/dev/null; ` +
      `then echo "${t} open"; else echo "${t} closed"; fi`
    ).join("; ");
    const reach = await sh(c, o.name, probe);
    for (const t of targets) assert.match(reach.stdout, new RegExp(`^${t} closed$`, "m"));
    const open = await sh(
      c,
      o.name,
      `timeout 4 bash -c 'exec 3<>/dev/tcp/${gw2}/3128' && echo open`,
    );
    assert.equal(open.stdout, "open\n", "the forward proxy port is reachable");

    // port isolation: a second proxy-only instance does not reach the first one's listener
    const listen = `setsid perl -MIO::Socket::INET -e '$s=IO::Socket::INET->new(LocalPort=>8080,` +
      `Listen=>5,ReuseAddr=>1) or die; while($c=$s->accept){print $c "peer\\n"; close $c}' ` +
      `>/dev/null 2>&1 < /dev/null & sleep 0.5; timeout 4 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080; cat <&3'`;
    const self = await sh(c, o.name, listen);
    assert.equal(
      self.stdout,
      "peer\n",
      `a listener inside the first proxy-only instance: ${self.stderr}`,
    );
    const r2 = await o.home.isx([
      "branch",
      o.peer,
      "--from",
      o.leaf,
      "--network",
      "proxy-only",
      "--no-preflight",
    ]);
    assert.equal(r2.code, 0, r2.stderr);
    const peer = await sh(
      c,
      o.peer,
      `if timeout 4 bash -c 'exec 3<>/dev/tcp/${ipPo}/8080' 2>/dev/null; then echo open; else echo closed; fi`,
    );
    assert.equal(peer.stdout, "closed\n", "proxy-only instances do not reach each other");
  } finally {
    await applyDns(c, LIVE_PROXY_ONLY_BRIDGE, { names: [], gateway: gw2, tag }).catch(() => {});
    await proxy?.close();
    await registry.close();
    ac.abort();
    await Promise.all([origin.finished, stray.finished]);
  }
}
