/**
 * isb egress secrets end to end on loopback: the secrets file and per-bridge CA as
 * `isb rpc` writes them, the proxy's bridge listener (bound to loopback here), a sandbox
 * presenting its placeholder, and the fake upstream recording what arrives.
 */

import { equal, ok } from "node:assert/strict";
import { createCa } from "../proxy/tls/ca.ts";
import { ActivityCounter } from "../proxy/activity/counter.ts";
import { EgressSecrets } from "../proxy/egress/secrets.ts";
import { EgressListeners } from "../proxy/egress/serve.ts";
import { Secret } from "../proxy/config/secret.ts";
import { guestConnect, guestRequest, PortCallers, startFakeUpstream } from "./fakes/upstream.ts";

const PLACEHOLDER = "isb_placeholder_0123456789abcdef0123456789abcdef";
const VALUE = "REAL-egress-secret-value-42";
const BRIDGE = "isbbrx0badf00d";

/** One answer's head and `content-length` body (the connection may stay open after it). */
async function readAnswer(conn: Deno.Conn): Promise<string> {
  const buf = new Uint8Array(65536);
  let text = "";
  const timer = setTimeout(() => conn.close(), 10_000);
  try {
    for (;;) {
      const end = text.indexOf("\r\n\r\n");
      const len = Number(/content-length: *(\d+)/i.exec(text)?.[1] ?? 0);
      if (end >= 0 && text.length >= end + 4 + len) return text;
      const n = await conn.read(buf);
      if (n === null) return text;
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
  } finally {
    clearTimeout(timer);
  }
}

/** A caller the proxy knows by its port (a sandbox, untrusted, no grants). */
function instance(name: string, address: string) {
  return { name, incarnation: "t", view: 1, address, pins: {}, grant: [] as const };
}

/** A state dir holding the bridge's egress CA, as `isb rpc` writes it, and the proxy's parts. */
async function egressDir() {
  const dir = await Deno.makeTempDir();
  const callers = new PortCallers();
  const counter = new ActivityCounter({ now: Date.now, providers: ["anthropic"] });
  const ca = await createCa({ commonName: `isb egress CA ${BRIDGE}` });
  await Deno.mkdir(`${dir}/${BRIDGE}`, { recursive: true, mode: 0o700 });
  await Deno.writeTextFile(`${dir}/${BRIDGE}/ca.crt`, ca.certPem);
  await Deno.writeTextFile(`${dir}/${BRIDGE}/ca.key`, ca.keyPem, { mode: 0o600 });
  return { dir, callers, counter, ca };
}

Deno.test("proxy substitutes an isb egress secret on its allowed hosts only", async () => {
  const up = startFakeUpstream();
  const { dir, callers, counter, ca } = await egressDir();
  const [sandbox, other] = [instance("sb1", "x"), instance("other", "y")];
  const file = `${dir}/${BRIDGE}/secrets.json`;
  await Deno.writeTextFile(
    file,
    JSON.stringify({
      instance: "default/sb1",
      secrets: [{
        env: "TOKEN",
        placeholder: PLACEHOLDER,
        hosts: ["api.service.test:443"],
        value: VALUE,
      }],
    }),
    { mode: 0o600 },
  );
  await Deno.chmod(file, 0o600);
  const secrets = new EgressSecrets({ dir, periodMs: 60_000 });
  const listeners = new EgressListeners({
    clients: callers,
    counter,
    dir,
    bridgeInfo: () =>
      Promise.resolve({
        address: "10.99.0.1",
        allowed: [{ host: "api.service.test", port: 443 }, {
          host: "plain.service.test",
          port: 443,
        }],
      }),
    overrides: new Map([["api.service.test", up.origin], ["plain.service.test", up.origin]]),
    bindHost: "127.0.0.1",
    bindPort: () => 0,
  });
  try {
    await secrets.start();
    secrets.watch((entries) => void listeners.sync(entries));
    await listeners.sync(secrets.entries);
    const port = listeners.addrs(BRIDGE)[0]!.port;
    const ask = (caller: typeof sandbox, host: string) =>
      guestRequest(callers, {
        port,
        serverName: host,
        caCert: ca.certPem,
        caller,
        path: "/echo",
        headers: { authorization: `Bearer ${PLACEHOLDER}` },
      });
    const res = await ask(sandbox, "api.service.test");
    equal(res.status, 200);
    equal(up.requests.at(-1)!.headers.authorization, `Bearer ${VALUE}`);
    ok(!res.body.includes(VALUE), res.body);
    equal((await ask(sandbox, "plain.service.test")).status, 200);
    equal(up.requests.at(-1)!.headers.authorization, `Bearer ${PLACEHOLDER}`);
    equal((await ask(other, "api.service.test")).status, 421);
    equal(up.requests.length, 2);
    equal(counter.snapshot().instances.sb1!.traffic_requests, 2);
    // A file readable by others is not used: the listener goes away.
    await Deno.chmod(file, 0o644);
    await Deno.writeTextFile(file, (await Deno.readTextFile(file)) + " ");
    await secrets.reload();
    await listeners.sync(secrets.entries);
    equal(listeners.addrs(BRIDGE).length, 0);
  } finally {
    secrets.close();
    await listeners.close();
    await up.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy refuses an egress host name that resolves to no public address", async () => {
  const { dir, callers, counter, ca } = await egressDir();
  const sandbox = instance("sb1", "x");
  const asked: string[] = [];
  const listeners = new EgressListeners({
    clients: callers,
    counter,
    dir,
    bridgeInfo: () =>
      Promise.resolve({ address: "10.99.0.1", allowed: [{ host: "rebind.test", port: 443 }] }),
    bindHost: "127.0.0.1",
    bindPort: () => 0,
    // A rebinding answer: the allowed name now points at the host itself.
    resolve: (h) => (asked.push(h), Promise.resolve(["127.0.0.1", "169.254.169.254"])),
  });
  try {
    await listeners.sync([{
      bridge: BRIDGE,
      instance: "sb1",
      secrets: [{
        env: "TOKEN",
        placeholder: PLACEHOLDER,
        hosts: ["rebind.test"],
        value: new Secret(VALUE),
      }],
    }]);
    const res = await guestRequest(callers, {
      port: listeners.addrs(BRIDGE)[0]!.port,
      serverName: "rebind.test",
      caCert: ca.certPem,
      caller: sandbox,
      path: "/echo",
      headers: { authorization: `Bearer ${PLACEHOLDER}` },
    });
    equal(res.status, 502);
    ok(res.body.includes("resolves to no public address (127.0.0.1, 169.254.169.254)"), res.body);
    ok(!res.body.includes(VALUE));
    equal(asked[0], "rebind.test");
  } finally {
    await listeners.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy sends egress WebSocket upgrades and HTTP/1.0 through the same guard", async () => {
  const { dir, callers, counter, ca } = await egressDir();
  const sandbox = instance("sb1", "x");
  // "localhost" is allowed and the system resolves it to the host itself: what `fetch` and
  // `WebSocket` would connect to if they resolved the name on their own.
  const host = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const hostPort = (host.addr as Deno.NetAddr).port;
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of host) accepted.push(c);
  })();
  const asked: string[] = [];
  const listeners = new EgressListeners({
    clients: callers,
    counter,
    dir,
    bridgeInfo: () =>
      Promise.resolve({ address: "10.99.0.1", allowed: [{ host: "localhost", port: 443 }] }),
    bindHost: "127.0.0.1",
    bindPort: () => 0,
    resolve: (h) => (asked.push(h), Promise.resolve(["127.0.0.1"])),
  });
  try {
    await listeners.sync([{
      bridge: BRIDGE,
      instance: "sb1",
      secrets: [{
        env: "TOKEN",
        placeholder: PLACEHOLDER,
        hosts: ["localhost"],
        value: new Secret(VALUE),
      }],
    }]);
    const port = listeners.addrs(BRIDGE)[0]!.port;
    const heads = [
      `GET /echo HTTP/1.0\r\nhost: localhost:${hostPort}\r\nauthorization: Bearer ${PLACEHOLDER}\r\n\r\n`,
      `GET /ws HTTP/1.1\r\nhost: localhost:${hostPort}\r\nconnection: Upgrade\r\nupgrade: websocket\r\n` +
      `sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
      `authorization: Bearer ${PLACEHOLDER}\r\n\r\n`,
    ];
    for (const head of heads) {
      const { conn, localPort } = await guestConnect({
        port,
        serverName: "localhost",
        caCert: ca.certPem,
      });
      callers.byPort.set(localPort, sandbox);
      await conn.write(new TextEncoder().encode(head));
      const res = await readAnswer(conn);
      conn.close();
      ok(/^HTTP\/1\.[01] 502 /.test(res), `${head.split("\r\n")[0]}: ${res}`);
      ok(!res.includes(VALUE));
    }
    equal(accepted.length, 0, "nothing connected to the host's listener");
    ok(asked.filter((h) => h === "localhost").length >= 2, `each went through the guard: ${asked}`);
  } finally {
    await listeners.close();
    host.close();
    await accepting.catch(() => {});
    for (const c of accepted) c.close();
    await Deno.remove(dir, { recursive: true });
  }
});
