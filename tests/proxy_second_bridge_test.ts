/**
 * The proxy serving a second bridge (isx's proxy-only bridge) on loopback: `addListen` on
 * 127.0.0.2 gives the same TLS interception and forward proxy there, sharing callers and
 * counters; `removeListen` and `close` take it down again. Callers are told apart by their
 * local port (PortCallers). Also: the proxy and `isx branch` agree on the bridge's mark.
 */

import { equal, ok, rejects } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { emptyCredentials } from "../proxy/config/credentials.ts";
import {
  KEY_ISX_ROLE as PROXY_KEY,
  Policy,
  ROLE_PROXY_ONLY as PROXY_ROLE,
  startProxy,
} from "../proxy/mod.ts";
import { KEY_ISX_ROLE, PROXY_ONLY_BRIDGE, ROLE_PROXY_ONLY } from "../mcp/mod.ts";
import { PROXY_ONLY_BRIDGE as PROXY_DEFAULT_BRIDGE } from "../proxy/mod.ts";
import { guestConnect, PortCallers } from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const A: Caller = {
  name: "po-a",
  incarnation: "2026-11-30T10:00:00Z",
  view: 1,
  address: "a",
  pins: {},
  grant: "all",
};

async function forwardGet(port: number, target: string, callers: PortCallers): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.2", port });
  try {
    callers.byPort.set((conn.localAddr as Deno.NetAddr).port, A);
    await conn.write(new TextEncoder().encode(`GET ${target} HTTP/1.1\r\nhost: x\r\n\r\n`));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    return new TextDecoder().decode(new Uint8Array(chunks.flatMap((c) => [...c])));
  } finally {
    try {
      conn.close();
    } catch { /* closed by the proxy */ }
  }
}

Deno.test("ProxyHandle.addListen serves the forward proxy and TLS interception on a second address", async () => {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const callers = new PortCallers();
  callers.instances = [A];
  const ac = new AbortController();
  const origin = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    () => new Response("origin\n"),
  );
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(emptyCredentials()),
    ca,
    clients: callers,
    allowLoopbackTargets: true,
  });
  try {
    const addrs = await proxy.addListen({ hostname: "127.0.0.2", tls: 0, forward: 0 });
    equal(addrs.forward.hostname, "127.0.0.2");
    ok(addrs.tls.port > 0);
    const res = await forwardGet(
      addrs.forward.port,
      `http://127.0.0.1:${origin.addr.port}/`,
      callers,
    );
    ok(res.startsWith("HTTP/1.1 200"), res);
    ok(res.endsWith("origin\n"), res);
    // TLS interception: the handshake for an intercepted name succeeds with the proxy CA
    const { conn } = await guestConnect({
      hostname: "127.0.0.2",
      port: addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: ca.certPem,
    });
    conn.close();
    equal(proxy.extraListens().join(), "127.0.0.2");
    await proxy.removeListen("127.0.0.2");
    equal(proxy.extraListens().length, 0);
    await rejects(Deno.connect({ hostname: "127.0.0.2", port: addrs.forward.port }));
    // added again, then left for close() to take down
    await proxy.addListen({ hostname: "127.0.0.2", tls: 0, forward: 0 });
  } finally {
    await proxy.close();
    ac.abort();
    await origin.finished;
    await Deno.remove(dir, { recursive: true });
  }
  await rejects(proxy.addListen({ hostname: "127.0.0.2", tls: 0, forward: 0 }), /closed/);
});

Deno.test("KEY_ISX_ROLE and the proxy-only bridge name agree between isx branch and the proxy", () => {
  equal(KEY_ISX_ROLE, PROXY_KEY);
  equal(ROLE_PROXY_ONLY, PROXY_ROLE);
  equal(PROXY_ONLY_BRIDGE, PROXY_DEFAULT_BRIDGE);
});
