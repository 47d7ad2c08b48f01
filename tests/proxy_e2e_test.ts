/**
 * The proxy end to end on loopback: a real TLS server, real sockets, the fake upstream in
 * tests/fakes/upstream.ts standing in for the services. Instances are told apart by the
 * guest connection's local port (PortCallers).
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import { setLogLevel, setLogSink } from "../rpc/mod.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import {
  type ActivityWire,
  parseActivity,
  Policy,
  type ProxyHandle,
  startProxy,
  stateOf,
  toRecords,
} from "../proxy/mod.ts";
import {
  type FakeUpstream,
  guestConnect,
  guestRequest,
  PortCallers,
  sendRequest,
  startFakeUpstream,
  STREAM_USAGE,
} from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

export const REAL_KEY = "sk-ant-api03-REAL-e2e-0123456789";
const CREDS = `
anthropic:
  default: main
  accounts:
    main: { api_key: ${REAL_KEY} }
openai:
  accounts:
    main: { api_key: sk-proj-REAL-openai }
github:
  accounts:
    me: { token: ghp_REALgithub }
`;

const A: Caller = {
  name: "inst-a",
  incarnation: "2026-11-30T10:00:00Z",
  view: 1,
  address: "a",
  pins: {},
  grant: "all",
};
const B: Caller = {
  name: "inst-b",
  incarnation: "2026-11-30T10:00:01Z",
  view: 1,
  address: "b",
  pins: {},
  grant: "all",
};

interface Env {
  up: FakeUpstream;
  callers: PortCallers;
  proxy: ProxyHandle;
  caCert: string;
  restart(): Promise<void>;
  activity(): Promise<ActivityWire>;
  post(
    caller: Caller,
    path: string,
    body: object,
    headers?: Record<string, string>,
  ): ReturnType<typeof guestRequest>;
  close(): Promise<void>;
}

async function setup(): Promise<Env> {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const callers = new PortCallers();
  callers.instances = [A, B];
  const policy = new Policy(parseCredentials(CREDS));
  const start = () =>
    startProxy({
      listen: loopbackListen(),
      policy,
      ca,
      clients: callers,
      upstreamOverrides: Object.fromEntries(
        ["api.anthropic.com", "api.openai.com", "github.com", "api.github.com"].map((
          h,
        ) => [h, up.origin]),
      ),
      allowLoopbackTargets: true,
    });
  const env: Env = {
    up,
    callers,
    proxy: await start(),
    caCert: ca.certPem,
    async restart() {
      await env.proxy.close();
      env.proxy = await start();
    },
    async activity() {
      const res = await fetch(`http://127.0.0.1:${env.proxy.addrs.health[0]!.port}/activity`);
      return parseActivity(await res.json());
    },
    post(caller, path, body, headers = {}) {
      const host = path.startsWith("/v1/messages") ? "api.anthropic.com" : "api.openai.com";
      return guestRequest(callers, {
        port: env.proxy.addrs.tls.port,
        serverName: host,
        caCert: ca.certPem,
        caller,
        method: "POST",
        path,
        headers: {
          "x-api-key": "sk-ant-placeholder",
          "content-type": "application/json",
          ...headers,
        },
        body: JSON.stringify(body),
      });
    },
    async close() {
      await env.proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
  return env;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new TypeError(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("proxy swaps the placeholder for the real key upstream and never shows it to the guest", async () => {
  const env = await setup();
  try {
    const res = await env.post(A, "/v1/messages", { model: "m", messages: [] });
    equal(res.status, 200);
    equal(env.up.requests[0]!.headers["x-api-key"], REAL_KEY);
    equal(env.up.requests[0]!.headers["accept-encoding"], "identity");
    ok(!res.body.includes(REAL_KEY), res.body);
    ok(res.body.includes('"echo":"' + "*".repeat(REAL_KEY.length)), res.body);
    for (const [, v] of res.headers) ok(!v.includes(REAL_KEY));
    ok(!Deno.inspect(env.proxy, { depth: 20 }).includes(REAL_KEY));
  } finally {
    await env.close();
  }
});

Deno.test("proxy counts SSE usage exactly and ends the call", async () => {
  const env = await setup();
  try {
    const res = await env.post(A, "/v1/messages", { model: "m", stream: true });
    equal(res.status, 200);
    ok(res.body.includes("message_stop"));
    ok(!res.body.includes(REAL_KEY));
    const a = await until("the call to end", async () => {
      const e = (await env.activity()).instances[A.name];
      return e && e.in_flight === 0 && e.requests === 1 ? e : undefined;
    });
    equal(a.input_tokens, STREAM_USAGE.input);
    equal(a.output_tokens, STREAM_USAGE.output);
    equal(a.cache_read_input_tokens, STREAM_USAGE.cacheRead);
    equal(a.cache_creation_input_tokens, STREAM_USAGE.cacheCreation);
    ok(a.last_response_at! >= a.last_request_at!);
    equal(a.traffic_requests, 1);
    ok(a.traffic_bytes_received > 300);
  } finally {
    await env.close();
  }
});

Deno.test("proxy counts 50 concurrent streams from two instances apart", async () => {
  const env = await setup();
  try {
    const calls = Array.from(
      { length: 50 },
      (_, i) => env.post(i % 2 ? B : A, "/v1/messages", { stream: true }),
    );
    for (const r of await Promise.all(calls)) equal(r.status, 200);
    const w = await until("all calls to end", async () => {
      const w = await env.activity();
      return w.instances[A.name]?.in_flight === 0 && w.instances[B.name]?.in_flight === 0
        ? w
        : undefined;
    });
    for (const name of [A.name, B.name]) {
      const e = w.instances[name]!;
      equal(e.requests, 25);
      equal(e.input_tokens, 25 * STREAM_USAGE.input);
      equal(e.output_tokens, 25 * STREAM_USAGE.output);
    }
  } finally {
    await env.close();
  }
});

Deno.test("proxy counts OpenAI Responses and Chat usage and lists openai as a provider", async () => {
  const env = await setup();
  try {
    equal((await env.post(A, "/v1/responses", { model: "x" })).status, 200);
    equal((await env.post(A, "/v1/chat/completions", { model: "x" })).status, 200);
    equal(env.up.requests[0]!.headers.authorization, "Bearer sk-proj-REAL-openai");
    const w = await env.activity();
    assertEquals(w.model_usage_providers, ["anthropic", "openai"]);
    const a = w.instances[A.name]!;
    equal(a.requests, 2);
    equal(a.input_tokens, 30);
    equal(a.cache_read_input_tokens, 10);
    equal(a.output_tokens, 12);
  } finally {
    await env.close();
  }
});

Deno.test("proxy refuses a caller no instance owns with 403 and counts it nowhere", async () => {
  const env = await setup();
  env.callers.instances = [];
  try {
    const res = await guestRequest(undefined, {
      port: env.proxy.addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: env.caCert,
      method: "POST",
      path: "/v1/messages",
      body: "{}",
    });
    equal(res.status, 403);
    equal(env.up.requests.length, 0);
    assertEquals((await env.activity()).instances, {});
  } finally {
    await env.close();
  }
});

Deno.test("proxy refuses a request from one instance carrying another's secret", async () => {
  const env = await setup();
  const hex = async (s: string) =>
    Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
  const a = { ...A, secretSha256: await hex("secret-of-a") };
  const b = { ...B, secretSha256: await hex("secret-of-b") };
  try {
    const bad = await env.post(a, "/v1/messages", {}, { "x-isx-instance-secret": "secret-of-b" });
    equal(bad.status, 403);
    const good = await env.post(a, "/v1/messages", {}, { "x-isx-instance-secret": "secret-of-a" });
    equal(good.status, 200);
    equal(env.up.requests.length, 1);
    equal(env.up.requests[0]!.headers["x-isx-instance-secret"], undefined);
    equal(b.secretSha256.length, 64);
  } finally {
    await env.close();
  }
});

Deno.test("proxy fails closed with 502 for a pin to a missing account", async () => {
  const env = await setup();
  try {
    const res = await env.post({ ...A, pins: { claude: "nobody" } }, "/v1/messages", {});
    equal(res.status, 502);
    ok(res.body.includes('account "nobody"'));
    equal(env.up.requests.length, 0);
  } finally {
    await env.close();
  }
});

Deno.test("proxy answers 502 when the upstream is down and the ended call counts as idle", async () => {
  const env = await setup();
  await env.up.close();
  try {
    const res = await env.post(A, "/v1/messages", { stream: true });
    equal(res.status, 502);
    ok(!res.body.includes(REAL_KEY));
    const a = (await env.activity()).instances[A.name]!;
    equal(a.requests, 1);
    equal(a.in_flight, 0);
    // a call that ended, however it ended, sets last_response_at (issue 12, seed 000)
    ok(a.last_response_at! >= a.last_request_at!);
    equal(typeof a.idle_seconds, "number");
    // and `isx proxy activity` shows the instance as idle, with an IDLE time
    const rec = toRecords(await env.activity()).find((r) => r.instance === A.name)!;
    equal(stateOf(rec), "idle");
    ok(rec.idle_seconds !== null);
  } finally {
    await env.proxy.close();
  }
});

Deno.test("proxy puts in_flight back to 0 when the client disconnects mid-stream", async () => {
  const env = await setup();
  try {
    const { conn: c2, localPort: p2 } = await guestConnect({
      port: env.proxy.addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: env.caCert,
    });
    env.callers.byPort.set(p2, A);
    await sendRequest(c2, {
      method: "POST",
      host: "api.anthropic.com",
      path: "/v1/messages",
      body: '{"hold":true}',
    });
    const first = new Uint8Array(64);
    ok((await c2.read(first)) !== null);
    const during = (await env.activity()).instances[A.name]!;
    equal(during.in_flight, 1);
    equal(during.idle_seconds, undefined);
    c2.close();
    await until("the held request to end", async () => {
      const e = (await env.activity()).instances[A.name];
      return e && e.traffic_requests_in_flight === 0 && e.in_flight === 0 ? e : undefined;
    });
    await until(
      "the upstream stream to be cancelled",
      () => Promise.resolve(env.up.cancelled > 0 || undefined),
    );
  } finally {
    await env.close();
  }
});

Deno.test("proxy gives a restarted proxy and a recreated instance a new counting_since", async () => {
  const env = await setup();
  try {
    await env.post(A, "/v1/messages", {});
    const before = (await env.activity()).instances[A.name]!;
    equal(before.requests, 1);
    await new Promise((r) => setTimeout(r, 5));
    await env.restart();
    const after = (await env.activity()).instances[A.name]!;
    ok(after.counting_since > before.counting_since);
    equal(after.requests, 0);
    await new Promise((r) => setTimeout(r, 5));
    env.callers.instances = [{ ...A, incarnation: "2026-11-30T12:00:00Z", view: 2 }, B];
    const recreated = (await env.activity()).instances[A.name]!;
    ok(recreated.counting_since > after.counting_since);
  } finally {
    await env.close();
  }
});

Deno.test("proxy relays GitHub with Basic auth for git and scrubs tokens from headers", async () => {
  const env = await setup();
  try {
    const res = await guestRequest(env.callers, {
      port: env.proxy.addrs.tls.port,
      serverName: "github.com",
      caCert: env.caCert,
      caller: A,
      path: "/echo",
      headers: { authorization: `Basic ${btoa("me:gho_placeholder")}` },
    });
    equal(res.status, 200);
    equal(atob(env.up.requests[0]!.headers.authorization!.slice(6)), "me:ghp_REALgithub");
    ok(!res.body.includes("ghp_REALgithub"));
    const e = (await env.activity()).instances[A.name]!;
    equal(e.requests, 0);
    equal(e.traffic_requests, 1);
  } finally {
    await env.close();
  }
});

Deno.test("proxy answers 421 for a Host it does not intercept", async () => {
  const env = await setup();
  try {
    const { conn, localPort } = await guestConnect({
      port: env.proxy.addrs.tls.port,
      serverName: "api.anthropic.com",
      caCert: env.caCert,
    });
    env.callers.byPort.set(localPort, A);
    await sendRequest(conn, { method: "GET", host: "evil.example", path: "/" });
    const text = new TextDecoder().decode(
      new Uint8Array(await new Response(conn.readable).arrayBuffer()),
    );
    ok(text.startsWith("HTTP/1.1 421"), text);
  } finally {
    await env.close();
  }
});

Deno.test("proxy never writes a real value into a log line or an error", async () => {
  const lines: string[] = [];
  setLogLevel("debug");
  setLogSink((l) => lines.push(l));
  const env = await setup();
  try {
    await env.post(A, "/v1/messages", { stream: true }, { "x-api-key": REAL_KEY });
    await env.post({ ...A, pins: { claude: "nobody" } }, "/v1/messages", {});
    await env.up.close();
    const down = await env.post(A, "/v1/messages", {});
    equal(down.status, 502);
    ok(!down.body.includes(REAL_KEY));
    ok(lines.length >= 2, lines.join("\n"));
    for (const l of lines) ok(!l.includes(REAL_KEY), l);
  } finally {
    // deno-lint-ignore no-console
    setLogSink((l) => console.error(l));
    setLogLevel("warn");
    await env.proxy.close();
  }
});

Deno.test("proxy hands a CONNECT to an intercepted host to the TLS server and relays WebSockets with credentials", async () => {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const everyone = { identify: () => Promise.resolve(A), known: () => [A] };
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(parseCredentials(CREDS)),
    ca,
    clients: everyone,
    upstreamOverrides: { "api.openai.com": up.origin },
  });
  const client = Deno.createHttpClient({
    caCerts: [ca.certPem],
    proxy: { url: `http://127.0.0.1:${proxy.addrs.forward.port}` },
  });
  try {
    const ws = new WebSocket("wss://api.openai.com/ws", {
      client,
      headers: { authorization: "Bearer sk-placeholder" },
    });
    const got: string[] = [];
    const closed = new Promise<void>((resolve) => (ws.onclose = () => resolve()));
    await new Promise<void>((resolve, reject) => {
      ws.onerror = () => reject(new TypeError("websocket failed"));
      ws.onmessage = (ev) => {
        got.push(String(ev.data));
        if (got.length === 1) ws.send("hi sk-proj-REAL-openai");
        else resolve();
      };
    });
    const during = proxy.counter.snapshot().instances[A.name]!;
    equal(during.traffic_websockets_in_flight, 1);
    ws.close();
    await closed;
    equal(up.requests[0]!.headers.authorization, "Bearer sk-proj-REAL-openai");
    // The upstream's first message names the real key: the guest sees it masked.
    ok(!got[0]!.includes("sk-proj-REAL-openai"), got[0]!);
    ok(got[1]!.startsWith("echo:hi "), got[1]!);
    ok(!got[1]!.includes("sk-proj-REAL-openai"));
    await until("the WebSocket to end", () => {
      const e = proxy.counter.snapshot().instances[A.name]!;
      return Promise.resolve(e.traffic_websockets_in_flight === 0 ? e : undefined);
    });
  } finally {
    client.close();
    await proxy.close();
    await up.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy tunnels a CONNECT through the forward port, counts it, and refuses strangers", async () => {
  const env = await setup();
  const dec = new TextDecoder();
  const talk = async (caller: Caller | undefined, head: string, then?: string) => {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: env.proxy.addrs.forward.port });
    if (caller) env.callers.byPort.set((conn.localAddr as Deno.NetAddr).port, caller);
    await conn.write(new TextEncoder().encode(head));
    const buf = new Uint8Array(4096);
    const n = await conn.read(buf);
    const first = dec.decode(buf.subarray(0, n ?? 0));
    let rest = "";
    if (then && first.startsWith("HTTP/1.1 200")) {
      await conn.write(new TextEncoder().encode(then));
      rest = dec.decode(new Uint8Array(await new Response(conn.readable).arrayBuffer()));
    } else conn.close();
    return { first, rest };
  };
  try {
    const stranger = await talk(undefined, `CONNECT 127.0.0.1:${env.up.port} HTTP/1.1\r\n\r\n`);
    ok(stranger.first.startsWith("HTTP/1.1 403"), stranger.first);
    const ok1 = await talk(
      A,
      `CONNECT 127.0.0.1:${env.up.port} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`,
      "GET /echo HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    ok(ok1.rest.startsWith("HTTP/1.1 200"), ok1.rest);
    const plain = await talk(
      A,
      `GET http://127.0.0.1:${env.up.port}/echo HTTP/1.1\r\nhost: x\r\n\r\n`,
    );
    ok(plain.first.startsWith("HTTP/1.1 200"), plain.first);
    const e = await until("the tunnels to end", async () => {
      const e = (await env.activity()).instances[A.name];
      return e && e.traffic_requests_in_flight === 0 && e.traffic_requests === 2 ? e : undefined;
    });
    ok(e.traffic_bytes_sent > 50 && e.traffic_bytes_received > 100);
    equal(e.requests, 0);
  } finally {
    await env.close();
  }
});
