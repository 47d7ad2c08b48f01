/**
 * The forward proxy attacked from inside a real proxy-only instance (issue 8, hole 3): its
 * only way out is the proxy's port 3128 on the proxy-only bridge's gateway, and through it
 * `curl -x` (and a raw `CONNECT`) to another instance, the gateways' other ports (a host
 * listener, the ops port), the host's own LAN addresses, loopback and link-local must all get
 * the one `cannot connect` answer, the same bytes the proxy gives for a target it cannot
 * reach, while the host listener and the other instance's listener see no connection. The
 * proxy is a real one from `startProxy` serving the real gateway; the instances are `dev-base`
 * containers (curl, python3), one on the lab's proxy-only bridge, one on the lab's bridge
 * (tests/helpers/lab.ts).
 */

import { deepStrictEqual, equal, ok } from "node:assert/strict";
import {
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_PROXY_ONLY_BRIDGE,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { ensureProxyOnlyBridge, proxyOnlyNic } from "../../mcp/mod.ts";
import { ClientRegistry, incusSource, loadCa, Policy, startProxy } from "../../proxy/mod.ts";
import { emptyCredentials } from "../../proxy/config/credentials.ts";
import { bridgeGateway } from "../../proxy/host/dns.ts";
import { unreachable } from "../../proxy/relay/forward.ts";
import { bridgeExists, removeBridgeIfMade } from "./_proxy_only.ts";

const IMAGE = "dev-base"; // curl, python3 (scripts/host-setup.sh)
const dec = new TextDecoder();

async function sh(incus: IncusClient, name: string, script: string, timeoutMs = 120_000) {
  let r;
  try {
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs });
  } catch (e) {
    // A busy incusd sometimes loses an exec websocket; the scripts here are safe to repeat.
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["bash", "-c", script], { timeoutMs });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 90_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new TypeError(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function ipv4(incus: IncusClient, name: string): Promise<string> {
  return await until(`an IPv4 address on ${name}`, async () => {
    const st = await incus.getInstanceState(name);
    return st.network?.eth0?.addresses.find((a) => a.family === "inet")?.address;
  });
}

/** A host listener on every address that records who connects. */
function hostListener() {
  const l = Deno.listen({ hostname: "0.0.0.0", port: 0 });
  const accepted: string[] = [];
  const done = (async () => {
    for await (const c of l) {
      accepted.push((c.remoteAddr as Deno.NetAddr).hostname);
      c.close();
    }
  })();
  return {
    port: (l.addr as Deno.NetAddr).port,
    accepted,
    async close() {
      l.close();
      await done.catch(() => {});
    },
  };
}

/** Records every accepted connection in /tmp/accepted (python3, in the background). */
const LISTENER = `nohup python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen(16)
while True:
    c, a = s.accept()
    open("/tmp/accepted", "a").write(a[0] + "\\n")
    c.close()
' >/dev/null 2>&1 </dev/null &`;

Deno.test({
  name: "forward proxy: a proxy-only instance reaches no instance, gateway port or host address",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const [po, full] = [testName("fwdP"), testName("fwdF")];
    const created: string[] = [];
    const dir = await Deno.makeTempDir();
    const stray = hostListener();
    let existed = true;
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    try {
      existed = await bridgeExists(incus);
      // the lab's bridges (tests/helpers/lab.ts): the user's proxy serves isxproxy0's gateway
      const { bridge, gateway: gw2 } = await ensureProxyOnlyBridge(incus, {
        bridge: LIVE_BRIDGE,
        proxyOnlyBridge: LIVE_PROXY_ONLY_BRIDGE,
      });
      const gw1 = (await bridgeGateway(incus, LIVE_BRIDGE))!;
      registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
      await registry.start();
      proxy = await startProxy({
        listen: {
          tls: { hostname: "127.0.0.1", port: 0 },
          forward: { hostname: "127.0.0.1", port: 0 },
          health: [{ hostname: gw1, port: 0 }, { hostname: "127.0.0.1", port: 0 }],
        },
        policy: new Policy(emptyCredentials()),
        ca: await loadCa(`${dir}/ca`),
        clients: registry,
      });
      // The bridge's ACL lets guests reach only 443 and 3128 there; the lab's bridge is this
      // test's alone, so nothing else holds its gateway's 3128.
      await proxy.addListen({ hostname: gw2, tls: 0, forward: 3128 });
      created.push(po, full);
      await Promise.all([
        incus.createInstance({
          name: po,
          source: { type: "image", alias: IMAGE },
          devices: { eth0: proxyOnlyNic(bridge) },
          start: true,
        }, { step: `launch ${po}` }),
        incus.createInstance(
          { name: full, source: { type: "image", alias: IMAGE }, start: true },
          { step: `launch ${full}` },
        ),
      ]);
      const [ipPo, ipFull] = await Promise.all([ipv4(incus, po), ipv4(incus, full)]);
      ok(ipPo.startsWith(gw2.split(".").slice(0, 3).join(".")), "on the proxy-only bridge");
      await sh(incus, full, LISTENER);
      // Control: the other instance's listener and the host listener are reachable at all.
      await until("the other instance's listener", async () => {
        const c = await Deno.connect({ hostname: ipFull, port: 8080 });
        c.close();
        return true;
      });
      const fromFull = await sh(
        incus,
        full,
        `timeout 5 bash -c 'exec 3<>/dev/tcp/${gw1}/${stray.port}' && echo open`,
      );
      equal(fromFull.out, "open\n", "a full instance reaches the host listener");
      await sh(incus, full, ": > /tmp/accepted");
      stray.accepted.length = 0;

      const P = stray.port;
      const health = proxy.addrs.health[0]!.port;
      const lan = Deno.networkInterfaces().filter((i) =>
        i.family === "IPv4" && !i.address.startsWith("127.") && i.address !== gw1 &&
        i.address !== gw2 && !i.address.startsWith("10.78.")
      ).map((i) => i.address).slice(0, 2);
      const targets: [string, number][] = [
        [ipFull, 8080], // another instance
        [gw2, P], // the gateway's other ports
        [gw2, 22],
        [gw1, P],
        [gw1, health], // the ops port
        ["127.0.0.1", P],
        ["169.254.169.254", 80],
        ...lan.map((a): [string, number] => [a, P]), // the host's LAN addresses
      ];
      for (const [host, port] of targets) {
        const want = dec.decode(unreachable());
        const via = await sh(
          incus,
          po,
          `curl -s -o /tmp/body -w '%{http_code}' --max-time 10 -x http://${gw2}:3128 http://${host}:${port}/; echo; cat /tmp/body`,
        );
        equal(via.out, `502\n${want.slice(want.indexOf("\r\n\r\n") + 4)}`, `curl -x ${host}`);
        const raw = await sh(
          incus,
          po,
          `exec 3<>/dev/tcp/${gw2}/3128; printf 'CONNECT ${host}:${port} HTTP/1.1\\r\\nhost: ${host}:${port}\\r\\n\\r\\n' >&3; timeout 10 cat <&3 | base64 -w0`,
        );
        equal(
          dec.decode(Uint8Array.from(atob(raw.out.trim()), (ch) => ch.charCodeAt(0))),
          want,
          `CONNECT ${host}:${port}: byte for byte the answer for an unreachable target`,
        );
      }
      deepStrictEqual(stray.accepted, [], "the host listener saw no connection");
      equal((await sh(incus, full, "cat /tmp/accepted")).out, "", "nor did the other instance");
    } finally {
      for (const n of created) await removeInstance(incus, n);
      await proxy?.close();
      await registry?.close();
      await stray.close();
      await removeBridgeIfMade(incus, existed).catch(() => {});
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
