/**
 * The forward proxy's target guard on loopback: the proxy runs with the test hook off
 * (loopback targets refused like any host address), the host's addresses and subnets and
 * the DNS answers given by the test. A refused target (a host listener, a private or a
 * rebound name) and a target that cannot be reached get the same bytes back, and the
 * refused listener never sees a connection; an allowed answer is connected to at the
 * address that was checked.
 */

import { deepStrictEqual, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { emptyCredentials } from "../proxy/config/credentials.ts";
import { parseCidr } from "../proxy/egress/guard.ts";
import { Policy, type ProxyHandle, startProxy } from "../proxy/mod.ts";
import { PortCallers } from "./fakes/upstream.ts";
import { unreachable } from "../proxy/relay/forward.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const A: Caller = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
const dec = new TextDecoder();

/** A plain listener that records every connection it accepts. */
function listener(hostname: string) {
  const l = Deno.listen({ hostname, port: 0 });
  const accepted: string[] = [];
  const done = (async () => {
    for await (const c of l) {
      accepted.push((c.remoteAddr as Deno.NetAddr).hostname);
      await c.write(new TextEncoder().encode("hello\n")).catch(() => 0);
      c.close(); // the tunnel ends
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

/** Sends one forward-proxy request as caller A and reads until the proxy closes (or 2 s). */
async function ask(proxy: ProxyHandle, callers: PortCallers, head: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.addrs.forward.port });
  callers.byPort.set((conn.localAddr as Deno.NetAddr).port, A);
  await conn.write(new TextEncoder().encode(head));
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(4096);
  const timer = setTimeout(() => conn.close(), 2000);
  try {
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
  } catch {
    /* closed by the timer: a tunnel that stayed open */
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed */ }
  }
  return chunks.map((c) => dec.decode(c)).join("");
}

Deno.test("forward proxy refuses the host, private and rebound targets with the answer of an unreachable one", async () => {
  const dir = await Deno.makeTempDir();
  const callers = new PortCallers();
  callers.instances = [A];
  const host = listener("127.0.0.2");
  const open = listener("127.0.0.3");
  const closedPort = (() => {
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const p = (l.addr as Deno.NetAddr).port;
    l.close();
    return p;
  })();
  const dns: Record<string, string[]> = {
    "private.test": ["10.1.2.3", "192.168.0.9"],
    "rebound.test": ["127.0.0.2"],
    "gateway.test": ["203.0.114.9"],
  };
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(emptyCredentials()),
    ca: await loadCa(`${dir}/ca`),
    clients: callers,
    resolve: (name) => Promise.resolve(dns[name] ?? []),
    // A "public" bridge subnet and host address: refused although public.
    hostNets: () => ({ own: new Set(["198.51.99.7"]), subnets: [parseCidr("203.0.114.0/24")!] }),
  });
  try {
    const connect = (t: string) =>
      ask(proxy, callers, `CONNECT ${t} HTTP/1.1\r\nhost: ${t}\r\n\r\n`);
    const get = (t: string) =>
      ask(proxy, callers, `GET http://${t}/ HTTP/1.1\r\nhost: ${t}\r\n\r\n`);
    // Every answer is exactly the one for an unreachable target of that name.
    const same = (t: string, got: string) => equal(got, dec.decode(unreachable()), t);
    // Unreachable (nothing listens), and refused targets: byte for byte the same shape.
    same(`127.0.0.1:${closedPort}`, await connect(`127.0.0.1:${closedPort}`));
    for (
      const t of [
        `127.0.0.2:${host.port}`,
        `localhost:${host.port}`,
        `[::1]:${host.port}`,
        `[::ffff:127.0.0.2]:${host.port}`,
        `0.0.0.0:${host.port}`,
        `private.test:${host.port}`,
        `rebound.test:${host.port}`,
        `gateway.test:${host.port}`,
        `198.51.99.7:${host.port}`,
        `169.254.169.254:80`,
        `10.77.0.1:18080`,
      ]
    ) {
      same(t, await connect(t));
      same(t, await get(t));
    }
    // The refused and the unreachable answer are the same bytes.
    equal(await connect(`127.0.0.1:${closedPort}`), await connect(`127.0.0.2:${closedPort}`));
    deepStrictEqual(host.accepted, [], "the host listener saw no connection");
    deepStrictEqual(open.accepted, []);
  } finally {
    await proxy.close();
    await host.close();
    await open.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("forward proxy connects to the address it checked, and a failure answers as a refusal", async () => {
  const dir = await Deno.makeTempDir();
  const callers = new PortCallers();
  callers.instances = [A];
  const target = listener("127.0.0.1");
  let lookups = 0;
  let flip: string[] = [];
  const proxy = await startProxy({
    listen: loopbackListen({ health: false }),
    policy: new Policy(emptyCredentials()),
    ca: await loadCa(`${dir}/ca`),
    clients: callers,
    allowLoopbackTargets: true,
    // The first answer is private (skipped); the allowed one is connected to. The name
    // itself resolves nowhere on this host, so reaching the listener proves the address
    // checked was used.
    resolve: (name) => {
      if (name === "flip.test") return Promise.resolve(flip);
      lookups++;
      return Promise.resolve(["10.9.9.9", "127.0.0.1"]);
    },
    hostNets: () => ({ own: new Set(), subnets: [] }),
  });
  try {
    const t = `only-in-the-test.invalid:${target.port}`;
    const got = await ask(proxy, callers, `CONNECT ${t} HTTP/1.1\r\nhost: ${t}\r\n\r\n`);
    ok(got.startsWith("HTTP/1.1 200 Connection Established\r\n\r\nhello\n"), got);
    equal(lookups, 1);
    deepStrictEqual(target.accepted, ["127.0.0.1"]);
    // The same name and port: once a real failed connection (nothing listens at the
    // allowed answer), once refused (a private answer): the same bytes.
    const closedPort = (() => {
      const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const p = (l.addr as Deno.NetAddr).port;
      l.close();
      return p;
    })();
    const u = `flip.test:${closedPort}`;
    flip = ["127.0.0.1"];
    const failed = await ask(proxy, callers, `CONNECT ${u} HTTP/1.1\r\nhost: ${u}\r\n\r\n`);
    flip = ["10.1.2.3"];
    const refused = await ask(proxy, callers, `CONNECT ${u} HTTP/1.1\r\nhost: ${u}\r\n\r\n`);
    equal(failed, dec.decode(unreachable()));
    equal(refused, failed);
  } finally {
    await proxy.close();
    await target.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy stops while a tunnel's upstream stays open after the guest half-closed", async () => {
  const dir = await Deno.makeTempDir();
  const callers = new PortCallers();
  callers.instances = [A];
  // An upstream that accepts and then never says or closes anything.
  const quiet = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of quiet) held.push(c);
  })();
  const proxy = await startProxy({
    listen: loopbackListen({ health: false }),
    policy: new Policy(emptyCredentials()),
    ca: await loadCa(`${dir}/ca`),
    clients: callers,
    allowLoopbackTargets: true,
  });
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: proxy.addrs.forward.port });
    callers.byPort.set((conn.localAddr as Deno.NetAddr).port, A);
    const t = `127.0.0.1:${(quiet.addr as Deno.NetAddr).port}`;
    await conn.write(new TextEncoder().encode(`CONNECT ${t} HTTP/1.1\r\nhost: ${t}\r\n\r\n`));
    const buf = new Uint8Array(256);
    ok(dec.decode(buf.subarray(0, (await conn.read(buf))!)).startsWith("HTTP/1.1 200"));
    await conn.closeWrite();
    await new Promise((r) => setTimeout(r, 100)); // the proxy passes the half-close on
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      proxy.close(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new TypeError("proxy.close() hung on the tunnel")), 10_000);
      }),
    ]).finally(() => clearTimeout(timer));
    conn.close();
  } finally {
    // The upstream's end first: a proxy.close() that hung above can finish now.
    quiet.close();
    await accepting.catch(() => {});
    for (const c of held) c.close();
    await proxy.close();
    await Deno.remove(dir, { recursive: true });
  }
});
