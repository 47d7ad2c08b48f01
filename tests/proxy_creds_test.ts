/**
 * The relay's side of command-sourced credentials on loopback (issue 23; the container
 * version is tests/live/proxy_creds_test.ts): after a 401 the request goes once more with the
 * refreshed value and the very same body, a body over the replay limit gets the 401 but its
 * next try the new value, and a rotated key stays scrubbed after a live update.
 */

import { equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import { parseCredentials } from "../proxy/config/credentials.ts";
import { CommandSources, Policy, type RunCommand, startProxy } from "../proxy/mod.ts";
import { guestRequest, PortCallers, startFakeUpstream } from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";
import { REPLAY_LIMIT } from "../proxy/relay/mod.ts";

const A: Caller = { name: "a", incarnation: "1", view: 1, address: "a", pins: {}, grant: "all" };
const HOST = "api.anthropic.com";

async function setup(creds: string) {
  const dir = await Deno.makeTempDir();
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const callers = new PortCallers();
  callers.instances = [A];
  let n = 0;
  const run: RunCommand = () =>
    Promise.resolve({ code: 0, stdout: new TextEncoder().encode(`sk-ant-CMD-${++n}`) });
  const sources = new CommandSources({ run });
  const policy = new Policy(parseCredentials(creds));
  const proxy = await startProxy({
    listen: loopbackListen({ health: false }),
    policy,
    ca,
    clients: callers,
    sources,
    upstreamOverrides: { [HOST]: up.origin },
  });
  const post = (body: string) =>
    guestRequest(callers, {
      port: proxy.addrs.tls.port,
      serverName: HOST,
      caCert: ca.certPem,
      caller: A,
      method: "POST",
      path: "/v1/messages",
      headers: { "x-api-key": "sk-ant-placeholder", "content-type": "application/json" },
      body,
    });
  return {
    up,
    policy,
    post,
    runs: () => n,
    async close() {
      await proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const COMMAND = "anthropic: { accounts: { m: { api_key: { command: [tok], ttl: 1h } } } }";

Deno.test("relay sends a refused request once more with the refreshed value and the same body", async () => {
  const env = await setup(COMMAND);
  try {
    equal((await env.post("{}")).status, 200);
    env.up.validKeys = new Set(["sk-ant-CMD-2"]);
    const body = JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: "x".repeat(70_000) }],
    });
    const before = env.up.requests.length;
    const r = await env.post(body);
    equal(r.status, 200, r.body);
    const sent = env.up.requests.slice(before);
    equal(sent.length, 2);
    equal(sent[0]!.headers["x-api-key"], "sk-ant-CMD-1");
    equal(sent[1]!.headers["x-api-key"], "sk-ant-CMD-2");
    equal(sent[1]!.body, body, "the retry carries the same body");
    equal(env.runs(), 2);
    ok(!r.body.includes("sk-ant-CMD"), "the new value is scrubbed from the retried answer");
  } finally {
    await env.close();
  }
});

Deno.test("relay gives a body over the replay limit the 401, and its next try the refreshed value", async () => {
  const env = await setup(COMMAND);
  try {
    equal((await env.post("{}")).status, 200);
    env.up.validKeys = new Set(["sk-ant-CMD-2"]);
    const big = JSON.stringify({ pad: "y".repeat(REPLAY_LIMIT + 10) });
    equal((await env.post(big)).status, 401);
    const r = await env.post("{}");
    equal(r.status, 200);
    equal(env.up.requests.at(-1)!.headers["x-api-key"], "sk-ant-CMD-2");
    equal(env.runs(), 2, "one refresh");
  } finally {
    await env.close();
  }
});

Deno.test("Policy.update applies to the next request and keeps the rotated key scrubbed", async () => {
  const env = await setup("anthropic: { accounts: { m: { api_key: sk-ant-OLD-1 } } }");
  try {
    equal(env.up.requests.length, 0);
    await env.post("{}");
    equal(env.up.requests.at(-1)!.headers["x-api-key"], "sk-ant-OLD-1");
    env.policy.update(
      parseCredentials("anthropic: { accounts: { m: { api_key: sk-ant-NEW-2 } } }"),
    );
    env.up.quote = "sk-ant-OLD-1";
    const r = await env.post("{}");
    equal(env.up.requests.at(-1)!.headers["x-api-key"], "sk-ant-NEW-2");
    ok(!r.body.includes("sk-ant-OLD-1") && !r.body.includes("sk-ant-NEW-2"), r.body);
  } finally {
    await env.close();
  }
});
