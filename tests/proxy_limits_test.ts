/**
 * What one guest may hold of the proxy, on loopback with short configured limits: the
 * per-instance connection cap across the TLS port and the forward proxy (refusals counted
 * in `/activity` as `refused`, other instances unaffected, a slot freed when a connection
 * ends), the header and keep-alive timeouts, and the stream timeout that a slow but
 * moving SSE stream does not trip while a stalled upstream is given up.
 */

import { equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { parseActivity, Policy, type ProxyHandle, startProxy } from "../proxy/mod.ts";
import type { ProxyLimits } from "../proxy/callers/limits.ts";
import { guestConnect, guestRequest, PortCallers } from "./fakes/upstream.ts";
import { startMockAnthropic } from "./fakes/mock_anthropic.ts";
import { MOCK_USAGE } from "./fakes/mock_model.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const A: Caller = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
const B: Caller = { name: "b", incarnation: "1", view: 1, address: "b", pins: {}, grant: "all" };
const HOST = "api.anthropic.com";
const enc = new TextEncoder();
const dec = new TextDecoder();

/** An upstream whose `/slow` streams 10 events 150 ms apart and `/stall` one, then nothing. */
function slowUpstream() {
  const ac = new AbortController();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen() {} },
    (req) => {
      const stall = new URL(req.url).pathname === "/stall";
      let i = 0;
      const body = new ReadableStream<Uint8Array>({
        start(ctl) {
          const tick = () => {
            ctl.enqueue(enc.encode(`event: e\ndata: {"n":${i}}\n\n`));
            if (++i === 10) return ctl.close();
            if (stall) return; // holds the response open, saying nothing
            const t = setTimeout(() => (timers.delete(t), tick()), 150);
            timers.add(t);
          };
          tick();
        },
        cancel() {
          for (const t of timers) clearTimeout(t);
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    },
  );
  return {
    origin: `http://127.0.0.1:${server.addr.port}`,
    async close() {
      for (const t of timers) clearTimeout(t);
      ac.abort();
      await server.finished;
    },
  };
}

interface Env {
  proxy: ProxyHandle;
  callers: PortCallers;
  caCert: string;
  close(): Promise<void>;
}

async function setup(
  limits: Partial<ProxyLimits>,
  origin?: string,
): Promise<Env & { up: { origin: string } }> {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = slowUpstream();
  const callers = new PortCallers();
  callers.instances = [A, B];
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(
      parseCredentials(`anthropic: { accounts: { m: { api_key: sk-x-123456 } } }`),
    ),
    ca,
    clients: callers,
    upstreamOverrides: { [HOST]: origin ?? up.origin },
    limits,
  });
  return {
    proxy,
    callers,
    caCert: ca.certPem,
    up,
    async close() {
      await proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A plain TCP connection to `port`, registered as `caller`. */
async function tcp(env: Env, port: number, caller: Caller): Promise<Deno.TcpConn> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  env.callers.byPort.set((c.localAddr as Deno.NetAddr).port, caller);
  return c;
}

/**
 * A TLS connection to the TLS port, registered as `caller` (Deno's TLS listener hands a
 * connection over only once its handshake is done).
 */
async function tls(env: Env, caller: Caller): Promise<Deno.TlsConn> {
  const { conn, localPort } = await guestConnect({
    port: env.proxy.addrs.tls.port,
    serverName: HOST,
    caCert: env.caCert,
  });
  env.callers.byPort.set(localPort, caller);
  await conn.handshake();
  return conn;
}

/** Everything the peer sends until it closes; "timeout" if it has not after 10 s. */
async function drain(c: Deno.Conn): Promise<string> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    c.close();
  }, 10_000);
  let out = "";
  const buf = new Uint8Array(4096);
  try {
    for (;;) {
      const n = await c.read(buf);
      if (n === null) break;
      out += dec.decode(buf.subarray(0, n));
    }
  } catch (e) {
    if (timedOut) return "timeout";
    if (!(e instanceof Deno.errors.ConnectionReset || e instanceof Deno.errors.UnexpectedEof)) {
      throw e;
    }
  } finally {
    clearTimeout(timer);
  }
  return out;
}

async function activity(env: Env) {
  const res = await fetch(`http://127.0.0.1:${env.proxy.addrs.health[0]!.port}/activity`);
  return parseActivity(await res.json()).instances;
}

Deno.test("proxy caps one instance's connections across ports, counts the refusals, spares the others", async () => {
  const env = await setup({ connectionsPerInstance: 2 });
  const open: Deno.Conn[] = [];
  try {
    const fwd = env.proxy.addrs.forward.port;
    open.push(await tcp(env, fwd, A), await tls(env, A));
    await new Promise((r) => setTimeout(r, 200)); // both admitted (and identified)
    const third = await tcp(env, fwd, A);
    const refused = await drain(third);
    third.close();
    ok(refused.startsWith("HTTP/1.1 503 Service Unavailable\r\n"), refused);
    ok(refused.includes("too many connections from this instance"), refused);
    const tlsThird = await tls(env, A);
    equal(await drain(tlsThird), "", "a refused TLS connection is closed");
    tlsThird.close();
    // Another instance is served.
    const b = await tcp(env, fwd, B);
    await b.write(enc.encode("CONNECT 127.0.0.1:1 HTTP/1.1\r\nhost: x\r\n\r\n"));
    ok((await drain(b)).startsWith("HTTP/1.1 502 Bad Gateway"), "B is served");
    b.close();
    const counts = await activity(env);
    equal(counts.a!.refused, 2);
    equal(counts.b!.refused, 0);
    // A slot comes back when a connection ends.
    open.shift()!.close();
    let again = "";
    for (let i = 0; i < 50 && !again.startsWith("HTTP/1.1 502"); i++) {
      await new Promise((r) => setTimeout(r, 50));
      const c = await tcp(env, fwd, A);
      await c.write(enc.encode("CONNECT 127.0.0.1:1 HTTP/1.1\r\nhost: x\r\n\r\n")).catch(() => 0);
      again = await drain(c);
      c.close();
    }
    ok(again.startsWith("HTTP/1.1 502 Bad Gateway"), again);
  } finally {
    for (const c of open) c.close();
    await env.close();
  }
});

Deno.test("proxy closes a connection whose head does not come and an idle kept-alive one", async () => {
  const env = await setup({ headerTimeoutMs: 300, keepAliveMs: 300 });
  try {
    // Nothing sent at all, on either port: closed.
    for (const c of [await tcp(env, env.proxy.addrs.forward.port, A), await tls(env, A)]) {
      equal(await drain(c), "");
      c.close();
    }
    // Half a head on the forward port: closed without an answer.
    const half = await tcp(env, env.proxy.addrs.forward.port, A);
    await half.write(enc.encode("CONNECT example.com:443 HTTP/1.1\r\n"));
    equal(await drain(half), "");
    half.close();
    // One request kept alive, then silence: the connection is closed after its answer.
    const conn = await tls(env, A);
    await conn.write(enc.encode(`GET /slow HTTP/1.1\r\nhost: ${HOST}\r\n\r\n`));
    const all = await drain(conn);
    ok(all.startsWith("HTTP/1.1 200"), all);
    ok(all.includes('data: {"n":9}'), "the whole response came before the idle close");
    conn.close();
  } finally {
    await env.close();
  }
});

Deno.test("proxy keeps a slow SSE stream that moves and gives up a stalled upstream", async () => {
  const env = await setup({ streamIdleMs: 500 });
  try {
    const o = { port: env.proxy.addrs.tls.port, serverName: HOST, caCert: env.caCert, caller: A };
    // 10 events 150 ms apart: 1.35 s in all, longer than the 500 ms stream timeout.
    const t0 = performance.now();
    const slow = await guestRequest(env.callers, { ...o, path: "/slow" });
    equal(slow.status, 200);
    for (let i = 0; i < 10; i++) ok(slow.body.includes(`data: {"n":${i}}`), `event ${i}`);
    ok(performance.now() - t0 > 500, "the stream outlived the stream timeout");
    // One event, then nothing: the proxy ends the response (incomplete) instead of waiting.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stalled = await Promise.race([
      guestRequest(env.callers, { ...o, path: "/stall" }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new TypeError("the stalled response was kept")), 10_000);
      }),
    ]).finally(() => clearTimeout(timer));
    equal(stalled.status, 200);
    ok(stalled.body.includes('data: {"n":0}'));
    ok(!stalled.body.includes('data: {"n":1}'));
    const counts = await activity(env);
    equal(counts.a!.traffic_requests_in_flight, 0, "the stalled call ended");
  } finally {
    await env.close();
  }
});

Deno.test("proxy measured against the mock Anthropic API: event gaps under the stream timeout pass, one over it cuts", async () => {
  const mock = startMockAnthropic();
  const env = await setup({ streamIdleMs: 600 }, mock.origin);
  try {
    const call = () =>
      guestRequest(env.callers, {
        port: env.proxy.addrs.tls.port,
        serverName: HOST,
        caCert: env.caCert,
        caller: A,
        method: "POST",
        path: "/v1/messages",
        headers: { "content-type": "application/json", "x-api-key": "sk-ant-placeholder" },
        body: JSON.stringify({
          model: "m",
          stream: true,
          max_tokens: 10,
          messages: [{ role: "user", content: "hi" }],
        }),
      });
    // Every event 250 ms after the one before: the call lasts well past the 600 ms timeout.
    mock.queue({ delayMs: 250 });
    const t0 = performance.now();
    const ok1 = await call();
    equal(ok1.status, 200);
    ok(ok1.body.includes("event: message_stop"), ok1.body);
    ok(performance.now() - t0 > 600, "the stream outlived the stream timeout");
    let a = (await activity(env)).a!;
    equal(a.output_tokens, MOCK_USAGE.output, "the whole call was counted");
    // 1.5 s of silence before the first event: over the timeout, the call is given up.
    mock.queue({ delayMs: 1500 });
    const cut = await call();
    ok(!cut.body.includes("message_stop"), cut.body);
    a = (await activity(env)).a!;
    equal(a.in_flight, 0, "the cut call ended");
    equal(a.requests, 2);
  } finally {
    await env.close();
    await mock.close();
  }
});
