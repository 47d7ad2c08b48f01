/**
 * Responses an upstream compresses although the proxy asked for `Accept-Encoding: identity`,
 * through the relay on loopback: usage is counted either way; with real values configured
 * the body reaches the guest decoded and scrubbed; without, exactly as sent; a coding the
 * proxy cannot undo is refused when there is something to scrub.
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { brotliDecompressSync } from "node:zlib";
import { setLogSink } from "../rpc/mod.ts";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { parseActivity, Policy, type ProxyHandle, startProxy } from "../proxy/mod.ts";
import {
  type FakeUpstream,
  guestConnect,
  PortCallers,
  sendRequest,
  startFakeUpstream,
  STREAM_USAGE,
} from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const REAL_KEY = "sk-ant-api03-REAL-encoding-0123456789";
const A: Caller = {
  name: "enc-a",
  incarnation: "x",
  view: 1,
  address: "a",
  pins: {},
  grant: "all",
};
const dec = new TextDecoder();

interface Env {
  up: FakeUpstream;
  proxy: ProxyHandle;
  callers: PortCallers;
  caCert: string;
  close(): Promise<void>;
}

async function setup(creds: string): Promise<Env> {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const callers = new PortCallers();
  callers.instances = [A];
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(parseCredentials(creds)),
    ca,
    clients: callers,
    upstreamOverrides: { "api.anthropic.com": up.origin },
  });
  return {
    up,
    proxy,
    callers,
    caCert: ca.certPem,
    async close() {
      await proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** One model call; the response with its body as bytes (chunked framing undone). */
async function call(
  env: Env,
  o: { coding: string; stream: boolean; http10?: boolean },
): Promise<{ status: number; headers: Headers; body: Uint8Array }> {
  const { conn, localPort } = await guestConnect({
    port: env.proxy.addrs.tls.port,
    serverName: "api.anthropic.com",
    caCert: env.caCert,
  });
  env.callers.byPort.set(localPort, A);
  try {
    if (o.http10) {
      // HTTP/1.0 goes to the `Deno.serve` handler behind the relay.
      const body = JSON.stringify({ model: "m", stream: o.stream });
      const head = [
        "POST /v1/messages HTTP/1.0",
        "host: api.anthropic.com",
        "x-api-key: sk-ant-placeholder",
        "content-type: application/json",
        `x-fake-content-encoding: ${o.coding}`,
        `content-length: ${body.length}`,
      ];
      await conn.write(new TextEncoder().encode(`${head.join("\r\n")}\r\n\r\n${body}`));
    } else {await sendRequest(conn, {
        method: "POST",
        host: "api.anthropic.com",
        path: "/v1/messages",
        headers: {
          "x-api-key": "sk-ant-placeholder",
          "content-type": "application/json",
          "x-fake-content-encoding": o.coding,
        },
        body: JSON.stringify({ model: "m", stream: o.stream }),
      });}
    const raw = new Uint8Array(await new Response(conn.readable).arrayBuffer());
    let end = 0;
    while (
      !(raw[end] === 13 && raw[end + 1] === 10 && raw[end + 2] === 13 && raw[end + 3] === 10)
    ) end++;
    const [status = "", ...lines] = dec.decode(raw.subarray(0, end)).split("\r\n");
    const headers = new Headers(
      lines.map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trim()]),
    );
    let body = raw.subarray(end + 4);
    if (headers.get("transfer-encoding") === "chunked") {
      const parts: number[] = [];
      for (let at = 0;;) {
        const nl = body.indexOf(13, at);
        const size = parseInt(dec.decode(body.subarray(at, nl)), 16);
        if (!size) break;
        parts.push(...body.subarray(nl + 2, nl + 2 + size));
        at = nl + 2 + size + 2;
      }
      body = Uint8Array.from(parts);
    }
    return { status: Number(status.split(" ")[1]), headers, body };
  } finally {
    env.callers.byPort.delete(localPort);
  }
}

async function gunzip(bytes: Uint8Array): Promise<string> {
  const s = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  return await new Response(s).text();
}

/** Waits for the model calls to end; returns the instance's usage. */
async function usage(env: Env, requests: number) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${env.proxy.addrs.health[0]!.port}/activity`);
    const e = parseActivity(await res.json()).instances[A.name];
    if (e && e.requests === requests && e.in_flight === 0) {
      return [e.input_tokens, e.output_tokens, e.cache_read_input_tokens];
    }
    if (Date.now() > deadline) throw new TypeError(`timed out waiting for ${requests} calls`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("proxy relays a gzip event stream as sent and counts its usage when nothing is to be scrubbed", async () => {
  const env = await setup("{}");
  try {
    const res = await call(env, { coding: "gzip", stream: true });
    equal(res.status, 200);
    equal(res.headers.get("content-encoding"), "gzip");
    const text = await gunzip(res.body);
    ok(text.includes("key was sk-ant-placeholder") && text.includes("message_stop"), text);
    assertEquals(await usage(env, 1), [
      STREAM_USAGE.input,
      STREAM_USAGE.output,
      STREAM_USAGE.cacheRead,
    ]);
  } finally {
    await env.close();
  }
});

Deno.test("proxy decodes, scrubs and counts compressed responses when real values are configured", async () => {
  const env = await setup(`anthropic: { accounts: { main: { api_key: ${REAL_KEY} } } }`);
  try {
    const codings = ["gzip", "deflate", "deflate-raw", "br"];
    for (const coding of codings) {
      const res = await call(env, { coding, stream: true });
      equal(res.status, 200, coding);
      equal(res.headers.get("content-encoding"), null, coding);
      equal(res.headers.get("content-length"), null, coding);
      const text = dec.decode(res.body);
      ok(text.includes(`key was ${"*".repeat(REAL_KEY.length)}`), `${coding}: ${text}`);
      ok(text.includes("message_stop") && !text.includes(REAL_KEY), coding);
    }
    const json = await call(env, { coding: "gzip", stream: false });
    ok(dec.decode(json.body).includes(`"echo":"${"*".repeat(REAL_KEY.length)}"`));
    const old = await call(env, { coding: "br", stream: true, http10: true });
    equal(old.status, 200);
    equal(old.headers.get("content-encoding"), null);
    ok(dec.decode(old.body).includes(`key was ${"*".repeat(REAL_KEY.length)}`));
    const n = codings.length + 1;
    assertEquals(await usage(env, n + 1), [
      n * STREAM_USAGE.input + 3,
      n * STREAM_USAGE.output + 4,
      n * STREAM_USAGE.cacheRead,
    ]);
    equal(env.up.requests[0]!.headers["x-api-key"], REAL_KEY);
  } finally {
    await env.close();
  }
});

Deno.test("proxy refuses a coding it cannot undo with 502 when real values are configured", async () => {
  const lines: string[] = [];
  setLogSink((l) => lines.push(l));
  const env = await setup(`anthropic: { accounts: { main: { api_key: ${REAL_KEY} } } }`);
  try {
    const res = await call(env, { coding: "zstd", stream: true });
    equal(res.status, 502);
    ok(dec.decode(res.body).includes(`response compressed as "zstd"`));
    ok(lines.some((l) => l.includes("which the proxy cannot scrub")), lines.join("\n"));
  } finally {
    // deno-lint-ignore no-console -- the logger's own default sink
    setLogSink((l) => console.error(l));
    await env.close();
  }
});

Deno.test("proxy relays a brotli JSON body as sent and counts it when nothing is to be scrubbed", async () => {
  const env = await setup("{}");
  try {
    const res = await call(env, { coding: "br", stream: false });
    equal(res.headers.get("content-encoding"), "br");
    ok(dec.decode(brotliDecompressSync(res.body)).includes('"echo":"sk-ant-placeholder"'));
    assertEquals(await usage(env, 1), [3, 4, 0]);
  } finally {
    await env.close();
  }
});
