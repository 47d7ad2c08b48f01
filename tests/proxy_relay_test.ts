/**
 * The relay's HTTP/1.1 handling end to end on loopback, against a scripted raw upstream
 * (tests/fakes/raw_upstream.ts): keep-alive on both sides, chunked bodies both ways,
 * close-delimited and interim responses, refused framings, hand-over to the `Deno.serve`
 * path, and per-instance upstream connections.
 */

import { deepStrictEqual, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { Policy, type ProxyHandle, startProxy } from "../proxy/mod.ts";
import { setLogSink } from "../rpc/mod.ts";
import { guestConnect, PortCallers } from "./fakes/upstream.ts";
import {
  RawClient,
  type RawReply,
  type RawRequest,
  type RawUpstream,
  startRawUpstream,
} from "./fakes/raw_upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const REAL = "sk-ant-api03-REAL-relay-0123456789";
const A: Caller = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
const B: Caller = { name: "b", incarnation: "1", view: 1, address: "b", pins: {}, grant: "all" };
const HOST = "api.anthropic.com";

interface Env {
  up: RawUpstream;
  proxy: ProxyHandle;
  callers: PortCallers;
  guest(caller: Caller): Promise<RawClient>;
  close(): Promise<void>;
}

async function setup(respond: (req: RawRequest) => RawReply): Promise<Env> {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startRawUpstream(respond);
  const callers = new PortCallers();
  callers.instances = [A, B];
  const proxy = await startProxy({
    listen: loopbackListen({ health: false }),
    policy: new Policy(parseCredentials(`anthropic: { accounts: { m: { api_key: ${REAL} } } }`)),
    ca,
    clients: callers,
    upstreamOverrides: { [HOST]: up.origin },
  });
  const clients: RawClient[] = [];
  return {
    up,
    proxy,
    callers,
    async guest(caller) {
      const { conn, localPort } = await guestConnect({
        port: proxy.addrs.tls.port,
        serverName: HOST,
        caCert: ca.certPem,
      });
      callers.byPort.set(localPort, caller);
      const c = new RawClient(conn);
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) {
        try {
          c.conn.close();
        } catch { /* closed by the test */ }
      }
      await proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const post = (body: string, extra = "") =>
  `POST /v1/messages HTTP/1.1\r\nhost: ${HOST}\r\nx-api-key: sk-ant-placeholder\r\n` +
  `content-length: ${body.length}\r\n${extra}\r\n${body}`;

const json = (body: string) => ({
  parts: [
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
  ],
});

Deno.test("relay keeps a guest connection alive and reuses one upstream connection", async () => {
  const env = await setup((req) => json(`{"n":${req.body.length},"key":"${REAL}"}`));
  try {
    const g = await env.guest(A);
    for (const body of ["{}", '{"a":1}', '{"bb":22}']) {
      await g.send(post(body));
      const res = await g.read();
      equal(res?.status, 200);
      equal(res?.body, `{"n":${body.length},"key":"${"*".repeat(REAL.length)}"}`);
    }
    equal(env.up.requests.length, 3);
    equal(env.up.connections, 1);
    ok(env.up.requests.every((r) => r.head.includes(`x-api-key: ${REAL}`)));
    ok(env.up.requests.every((r) => /\r\nhost: 127\.0\.0\.1:\d+\r\n/.test(r.head)));
  } finally {
    await env.close();
  }
});

Deno.test("relay re-chunks a chunked response and masks a value split across its chunks", async () => {
  const half = REAL.length >> 1;
  const env = await setup(() => ({
    parts: [
      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
      `${(6 + half).toString(16)};ext=1\r\ndata: ${REAL.slice(0, half)}\r\n`,
      `${(REAL.length - half + 2).toString(16)}\r\n${REAL.slice(half)}\n\n\r\n`,
      "0\r\nx-trailer: 1\r\n\r\n",
    ],
  }));
  try {
    const g = await env.guest(A);
    await g.send(post("{}"));
    const res = await g.read();
    equal(res?.status, 200);
    ok(/\r\ntransfer-encoding: chunked\r\n/.test(res!.head), res!.head);
    equal(res?.body, `data: ${"*".repeat(REAL.length)}\n\n`);
    await g.send(post("{}"));
    equal((await g.read())?.status, 200, "the connection is still usable");
  } finally {
    await env.close();
  }
});

Deno.test("relay turns a close-delimited response into a chunked one and keeps the guest", async () => {
  const env = await setup(() => ({
    parts: ["HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil ", "the end"],
    close: true,
  }));
  try {
    const g = await env.guest(A);
    await g.send(post("{}"));
    const res = await g.read();
    equal(res?.body, "until the end");
    ok(/transfer-encoding: chunked/.test(res!.head));
    await g.send(post("{}"));
    equal((await g.read())?.body, "until the end");
    equal(env.up.connections, 2, "a close-delimited upstream connection is not reused");
  } finally {
    await env.close();
  }
});

Deno.test("relay forwards a chunked request body and the next request after it", async () => {
  const env = await setup((req) => json(req.body));
  try {
    const g = await env.guest(A);
    const head =
      `POST /v1/messages HTTP/1.1\r\nhost: ${HOST}\r\ntransfer-encoding: chunked\r\n\r\n`;
    await g.send(head + "3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n" + post("{}"));
    equal((await g.read())?.body, "abcdefg");
    equal((await g.read())?.body, "{}");
    ok(/transfer-encoding: chunked/i.test(env.up.requests[0]!.head));
  } finally {
    await env.close();
  }
});

Deno.test("relay passes 100 Continue on and then relays the body", async () => {
  const env = await setup((req) => json(req.body));
  try {
    const g = await env.guest(A);
    const body = '{"big":true}';
    await g.send(
      `POST /v1/messages HTTP/1.1\r\nhost: ${HOST}\r\nexpect: 100-continue\r\n` +
        `content-length: ${body.length}\r\n\r\n`,
    );
    equal((await g.read())?.status, 100);
    await g.send(body);
    equal((await g.read())?.body, body);
  } finally {
    await env.close();
  }
});

Deno.test("relay refuses ambiguous framing and an over-long head without reaching upstream", async () => {
  const lines: string[] = [];
  setLogSink((l) => lines.push(l));
  const env = await setup(() => json("{}"));
  try {
    const g = await env.guest(A);
    await g.send(post("{}", "transfer-encoding: chunked\r\n"));
    equal((await g.read())?.status, 400);
    ok(await g.closed());
    const h = await env.guest(A);
    await h.send(`GET / HTTP/1.1\r\nhost: ${HOST}\r\nx-big: ${"x".repeat(70_000)}\r\n\r\n`);
    equal((await h.read())?.status, 431);
    const i = await env.guest(A);
    await i.send(`GET / HTTP/1.1\r\nhost: ${HOST}\r\nbad header: 1\r\n\r\n`);
    equal((await i.read())?.status, 400);
    equal(env.up.requests.length, 0);
  } finally {
    // deno-lint-ignore no-console
    setLogSink((l) => console.error(l));
    await env.close();
  }
});

Deno.test("relay checks a request body's framing before its head (and key) go upstream", async () => {
  const env = await setup((req) => json(req.body));
  try {
    const chunkedHead =
      `POST /v1/messages HTTP/1.1\r\nhost: ${HOST}\r\nx-api-key: sk-ant-placeholder\r\n` +
      `transfer-encoding: chunked\r\n\r\n`;
    const bad = [
      "zz\r\nabc\r\n0\r\n\r\n", // not a size
      "3\r\nabcd\r\n0\r\n\r\n", // longer than its size
      "3\r\nabc\r\nqq\r\n", // a good first chunk, then garbage
      "3\nabc\n0\n\n", // bare LF
    ];
    for (const body of bad) {
      const g = await env.guest(A);
      // The head and the first bytes apart: the head must wait for the body's check.
      await g.send(chunkedHead);
      await new Promise((r) => setTimeout(r, 20));
      await g.send(body);
      equal((await g.read())?.status, 400, JSON.stringify(body));
    }
    // A guest that stops before its body ends: nothing went upstream either.
    const g = await env.guest(A);
    await g.send(post('{"a":1}').slice(0, -3));
    await g.conn.closeWrite();
    ok(await g.closed());
    deepStrictEqual(env.up.heads, [], "no head (and no key) reached the upstream");
    // A good chunked body sent in two parts still goes.
    const h = await env.guest(A);
    await h.send(chunkedHead + "3\r\nabc\r\n");
    await new Promise((r) => setTimeout(r, 20));
    await h.send("0\r\n\r\n");
    equal((await h.read())?.body, "abc");
    equal(env.up.heads.length, 1);
  } finally {
    await env.close();
  }
});

Deno.test("relay answers 502 for a malformed upstream response and ends the call", async () => {
  const env = await setup(() => ({ parts: ["HTTP/1.1 two hundred\r\n\r\n"], close: true }));
  try {
    const g = await env.guest(A);
    await g.send(post("{}"));
    equal((await g.read())?.status, 502);
    const e = env.proxy.counter.snapshot().instances[A.name]!;
    equal(e.requests, 1);
    equal(e.in_flight, 0);
    equal(e.traffic_requests_in_flight, 0);
  } finally {
    await env.close();
  }
});

Deno.test("relay opens a new upstream connection when a kept one was closed", async () => {
  let n = 0;
  const env = await setup(() => ({ ...json("{}"), close: ++n === 1 }));
  const get = `GET /v1/models HTTP/1.1\r\nhost: ${HOST}\r\n\r\n`;
  try {
    const g = await env.guest(A);
    await g.send(get);
    equal((await g.read())?.status, 200);
    await g.send(get);
    equal((await g.read())?.status, 200);
    equal(env.up.connections, 2);
  } finally {
    await env.close();
  }
});

Deno.test("relay never lets two instances share an upstream connection", async () => {
  const env = await setup(() => json("{}"));
  try {
    for (const c of [A, B, A]) {
      const g = await env.guest(c);
      await g.send(post("{}"));
      equal((await g.read())?.status, 200);
    }
    equal(env.up.connections, 2);
    equal(env.up.requests.filter((r) => r.connection === 1).length, 2);
  } finally {
    await env.close();
  }
});

Deno.test("relay hands an HTTP/1.0 request to the Deno.serve path", async () => {
  const env = await setup(() => json('{"via":"slow"}'));
  try {
    const g = await env.guest(A);
    await g.send(`POST /v1/messages HTTP/1.0\r\nhost: ${HOST}\r\ncontent-length: 2\r\n\r\n{}`);
    const res = await g.read();
    equal(res?.status, 200);
    equal(res?.body, '{"via":"slow"}');
    ok(env.up.requests[0]!.head.includes(`x-api-key: ${REAL}`));
  } finally {
    await env.close();
  }
});

Deno.test("relay carries a 1 MiB request body and its 1 MiB echo intact", async () => {
  const env = await setup((req) => ({
    parts: [
      `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${req.body.length}\r\n\r\n`,
      req.body,
    ],
  }));
  try {
    const body = Array.from({ length: 1 << 20 }, (_, i) => "abcdefghij"[i % 10]).join("");
    const g = await env.guest(A);
    await g.send(post(body));
    const res = await g.read();
    equal(res?.status, 200);
    equal(res?.body.length, body.length);
    ok(res?.body === body);
    equal(env.up.requests[0]!.body.length, body.length);
  } finally {
    await env.close();
  }
});
