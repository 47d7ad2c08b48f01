/**
 * WebSockets through the proxy on loopback (a CONNECT handed to the TLS server, as a guest's
 * `HTTPS_PROXY` client does): a real value never reaches the guest, in text or binary
 * messages or in the upstream's close reason.
 */

import { equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { Policy, startProxy } from "../proxy/mod.ts";
import { startFakeUpstream } from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const REAL = "sk-proj-REAL-websocket-0123456789";
const A: Caller = { name: "ws-a", incarnation: "x", view: 1, address: "a", pins: {}, grant: "all" };
const dec = new TextDecoder();

Deno.test("relayWebSocket scrubs real values from text and binary messages and the close reason", async () => {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(parseCredentials(`openai: { accounts: { main: { api_key: ${REAL} } } }`)),
    ca,
    clients: { identify: () => Promise.resolve(A), known: () => [A] },
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
    ws.binaryType = "arraybuffer";
    const got: string[] = [];
    let wanted = 0;
    let next: (() => void) | undefined;
    const closed = new Promise<CloseEvent>((resolve) => (ws.onclose = resolve));
    ws.onerror = () => next?.();
    ws.onmessage = (ev) => {
      got.push(typeof ev.data === "string" ? `text:${ev.data}` : `binary:${dec.decode(ev.data)}`);
      if (got.length >= wanted) next?.();
    };
    const expect = (n: number) => {
      wanted = n;
      return got.length >= n ? Promise.resolve() : new Promise<void>((r) => (next = r));
    };
    await expect(1); // the upstream's greeting names the authorization it got
    ws.send("binary-key");
    await expect(2);
    ws.send(new TextEncoder().encode(`mine ${REAL} too`));
    await expect(3);
    ws.send("close-with-key");
    const ev = await closed;
    const stars = "*".repeat(REAL.length);
    equal(got[0], `text:{"authorization":"Bearer ${stars}"}`);
    equal(got[1], `binary:key:Bearer ${stars}`);
    equal(got[2], `binary:echo:mine ${stars} too`);
    equal(ev.code, 4000);
    equal(ev.reason, `bye Bearer ${stars}`);
    ok(!got.join("").includes(REAL));
    equal(up.requests[0]!.headers.authorization, `Bearer ${REAL}`);
  } finally {
    client.close();
    await proxy.close();
    await up.close();
    await Deno.remove(dir, { recursive: true });
  }
});
