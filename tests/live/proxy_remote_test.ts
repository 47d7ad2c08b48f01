/**
 * The proxy's caller registry over an Incus remote (issue 11): this host's incusd reached as a
 * remote over HTTPS (tests/helpers/incus_remote.ts: loopback, a client certificate the real
 * `incus remote add --token` made), the instances launched through that remote with pinned
 * NICs as `isx branch` pins them, and the proxy's registry (`incusSource` over the HTTPS
 * client, as `isx --remote NAME proxy run` builds it in proxy/host/_host.ts) naming the callers of
 * its forward port on the bridge. Each guest's request is counted under its own name and no
 * other; a caller no instance owns (the host) gets 403. The targets are in TEST-NET-1, which
 * the proxy refuses without connecting, so nothing leaves the host.
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { createIncusClient, type IncusClient, resolveRemote } from "../../rpc/base.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { bridgeGateway } from "../../proxy/host/dns.ts";
import { parseActivity, Policy, startProxy } from "../../proxy/mod.ts";
import {
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  ofLab,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { liveRemote } from "../helpers/incus_remote.ts";
import { launchPinned, TRUSTED_STAMPS } from "./_pinned.ts";

const BRIDGE = LIVE_BRIDGE; // the lab's (tests/helpers/lab.ts), never the user's
const IMAGE = "dev-base"; // curl (scripts/host-setup.sh)

/**
 * The HTTPS client of a remote in `conf` (resolved as the CLI resolves `--remote`), in the
 * lab's project.
 */
function remoteClient(name: string, conf: string): IncusClient {
  const read = (p: string) => {
    try {
      return Deno.readTextFileSync(p);
    } catch {
      return undefined;
    }
  };
  const ep = resolveRemote(name, { confDir: conf, socket: "/nonexistent/unix.socket", read });
  ok("url" in ep, `${name} resolves to an HTTPS endpoint`);
  return createIncusClient({ ...ep, project: LIVE_PROJECT });
}

Deno.test({
  name: "proxy over an Incus remote: the registry names each pinned caller on the bridge",
  ignore: NO_INCUS,
  async fn() {
    const local = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const [a, b] = [testName("premA"), testName("premB")];
    const dir = await Deno.makeTempDir({ prefix: "isx-proxy-remote-" });
    let incus: IncusClient | undefined;
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    try {
      await using remote = await liveRemote(
        local,
        `isxtest-prem-${crypto.randomUUID().slice(0, 8)}`,
      );
      incus = remoteClient(remote.name, remote.conf);
      ok(incus.where.startsWith("https://"), incus.where);
      const gateway = (await bridgeGateway(incus, BRIDGE))!;
      ok(gateway, `${BRIDGE} has a gateway`);
      // one after the other: each picks its address among those the other left free
      const ipA = await launchPinned(incus, a, { stamps: { ...TRUSTED_STAMPS }, image: IMAGE });
      const ipB = await launchPinned(incus, b, { stamps: { ...TRUSTED_STAMPS }, image: IMAGE });
      registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
      await registry.start();
      await registry.refresh();
      const known = new Map((registry.known() ?? []).map((r) => [r.name, r]));
      // outside the default project the registry names them `<project>/<name>`
      ok(
        known.has(`${LIVE_PROJECT}/${a}`) && known.has(`${LIVE_PROJECT}/${b}`),
        "both instances are listed over the remote",
      );
      proxy = await startProxy({
        listen: {
          tls: { hostname: gateway, port: 0 },
          forward: { hostname: gateway, port: 0 },
          health: [{ hostname: "127.0.0.1", port: 0 }],
        },
        policy: new Policy(parseCredentials("{}"), {}),
        ca: await loadCa(`${dir}/ca`),
        clients: registry,
      });
      const fwd = `http://${gateway}:${proxy.addrs.forward.port}`;
      const activity = async () =>
        ofLab(parseActivity(
          await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[0]!.port}/activity`)).json(),
        )).instances;
      // one plain-HTTP request through the forward port from `name`: its status line
      const call = async (name: string, n: number) => {
        const r = await incus!.execCapture(name, [
          "sh",
          "-c",
          `for i in $(seq ${n}); do curl -sS --max-time 10 -o /dev/null -w '%{http_code}\\n' -x ${fwd} http://192.0.2.1/; done`,
        ], { timeoutMs: 120_000 });
        return new TextDecoder().decode(r.stdout).trim().split("\n");
      };
      const before = await activity();
      const base = (n: string) => before[n]?.traffic_requests ?? 0;
      // identified (past the caller check) and then refused as a target: 502, not 403
      assertEquals(await call(a, 2), ["502", "502"]);
      assertEquals(await call(b, 1), ["502"]);
      const after = await activity();
      equal(after[a]!.traffic_requests - base(a), 2, `${a} (${ipA}) counted as itself`);
      equal(after[b]!.traffic_requests - base(b), 1, `${b} (${ipB}) counted as itself`);
      // the host is no instance: the registry names no caller for it
      const c = await Deno.connect({ hostname: gateway, port: proxy.addrs.forward.port });
      try {
        await c.write(
          new TextEncoder().encode("GET http://192.0.2.1/ HTTP/1.1\r\nhost: x\r\n\r\n"),
        );
        const buf = new Uint8Array(256);
        const got = await c.read(buf);
        ok(
          new TextDecoder().decode(buf.subarray(0, got ?? 0)).startsWith("HTTP/1.1 403"),
          "an address no instance owns gets 403",
        );
      } finally {
        c.close();
      }
    } finally {
      await proxy?.close();
      await registry?.close();
      await Promise.all([a, b].map((n) => removeInstance(local, n)));
      incus?.close();
      local.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
