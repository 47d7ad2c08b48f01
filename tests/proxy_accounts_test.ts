/**
 * The proxy end to end on loopback for accounts, tools' `proxy:` rules and Vertex AI: a
 * real TLS server, real sockets, the fake upstream (tests/fakes/upstream.ts) standing in
 * for Anthropic, Vertex and a tool's service, tool rules read from real YAML files by the
 * loader the CLI uses, and Vertex tokens from a real command (a `deno eval` printing one).
 */

import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { loadCa } from "../proxy/tls/ca.ts";
import type { Caller } from "../proxy/callers/clients.ts";
import {
  type CustomRule,
  parseActivity,
  parseCredentials,
  Policy,
  type ProxyHandle,
  Secret,
  startProxy,
  VertexTokens,
} from "../proxy/mod.ts";
import { loadToolProxyRules } from "../mcp/mod.ts";
import {
  type FakeUpstream,
  guestRequest,
  PortCallers,
  startFakeUpstream,
  STREAM_USAGE,
} from "./fakes/upstream.ts";
import { loopbackListen } from "./helpers/proxy.ts";

const VERTEX_TOKEN = "ya29.REAL-vertex-token-0123456789";
const TOOL_TOKEN = "tool-REAL-token-abcdef";
const TOOL_PW = "tool-REAL-password-xyz";
const VERTEX_HOST = "us-east5-aiplatform.googleapis.com";

const CREDS = `
anthropic:
  accounts:
    key: { api_key: sk-ant-api03-REAL-key }
    key2: { api_key: sk-ant-api03-REAL-key2 }
    sub: { oauth_token: sk-ant-oat01-REAL-sub }
    gcp:
      vertex:
        project: my-proj
        region: us-east5
        token_command: [${JSON.stringify(Deno.execPath())}, eval, "console.log('${VERTEX_TOKEN}')"]
github:
  accounts:
    me: { token: ghp_REALme }
`;

const TOOL = `
description: a service the agent calls with the user's token
configuration:
  token: ${TOOL_TOKEN}
  pw: ${TOOL_PW}
proxy:
  - { domain: api.tooltest.dev, bearer: "\${token}" }
  - { domain: "*.wild.tooltest.dev", header: X-Tool-Key, value: "key-\${token}" }
  - { domain: git.tooltest.dev, basic: { user: bot, password: "\${pw}" } }
`;

function caller(name: string, extra: Partial<Caller> = {}): Caller {
  return {
    name,
    incarnation: "2026-12-01T10:00:00Z",
    view: 1,
    address: name,
    pins: {},
    grant: "all",
    ...extra,
  };
}

interface Env {
  up: FakeUpstream;
  callers: PortCallers;
  proxy: ProxyHandle;
  caCert: string;
  request(
    who: Caller,
    host: string,
    path: string,
    o?: { body?: object; headers?: Record<string, string>; method?: string },
  ): ReturnType<typeof guestRequest>;
  close(): Promise<void>;
}

async function setup(instances: Caller[], tokenCommand?: string[]): Promise<Env> {
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(`${dir}/config/tools`, { recursive: true });
  await Deno.writeTextFile(`${dir}/config/tools/tooltest.yaml`, TOOL);
  const rules: CustomRule[] = loadToolProxyRules({ configDir: `${dir}/config` }).map((r) =>
    r.kind === "header"
      ? { domain: r.domain, kind: "header", header: r.header, value: new Secret(r.value as string) }
      : r.kind === "basic"
      ? { domain: r.domain, kind: "basic", user: r.user, value: new Secret(r.value as string) }
      : { domain: r.domain, kind: "bearer", value: new Secret(r.value as string) }
  );
  const ca = await loadCa(`${dir}/ca`);
  const up = startFakeUpstream();
  const callers = new PortCallers();
  callers.instances = instances;
  const hosts = [
    "api.anthropic.com",
    VERTEX_HOST,
    "api.tooltest.dev",
    "a.wild.tooltest.dev",
    "git.tooltest.dev",
  ];
  const proxy = await startProxy({
    listen: loopbackListen(),
    policy: new Policy(
      parseCredentials(
        tokenCommand
          ? CREDS.replace(/token_command: .*\n/, `token_command: ${JSON.stringify(tokenCommand)}\n`)
          : CREDS,
      ),
      { toolRules: rules },
    ),
    ca,
    clients: callers,
    vertexTokens: new VertexTokens(),
    upstreamOverrides: Object.fromEntries(hosts.map((h) => [h, up.origin])),
    allowLoopbackTargets: true,
  });
  return {
    up,
    callers,
    proxy,
    caCert: ca.certPem,
    request(who, host, path, o = {}) {
      return guestRequest(callers, {
        port: proxy.addrs.tls.port,
        serverName: host,
        caCert: ca.certPem,
        caller: who,
        method: o.method ?? (o.body ? "POST" : "GET"),
        path,
        headers: { "x-api-key": "sk-ant-placeholder", ...o.headers },
        ...(o.body ? { body: JSON.stringify(o.body) } : {}),
      });
    },
    async close() {
      await proxy.close();
      await up.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

async function activity(env: Env) {
  const res = await fetch(`http://127.0.0.1:${env.proxy.addrs.health[0]!.port}/activity`);
  return parseActivity(await res.json());
}

const MESSAGE = {
  model: "claude-sonnet-4-5-20250929",
  max_tokens: 50,
  messages: [{ role: "user", content: "hi" }],
  context_management: { edits: [] },
};

Deno.test("proxy sends /v1/messages to Vertex: translated, with the command's token, counted, token never shown", async () => {
  const v = caller("inst-v");
  const env = await setup([v]);
  try {
    const res = await env.request(v, "api.anthropic.com", "/v1/messages?beta=true", {
      body: { ...MESSAGE, stream: true },
      headers: { "anthropic-version": "2023-06-01", "anthropic-beta": "x-2025" },
    });
    equal(res.status, 200, res.body);
    const got = env.up.requests.at(-1)!;
    equal(
      got.path,
      "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
    );
    equal(got.headers["authorization"], `Bearer ${VERTEX_TOKEN}`);
    equal(got.headers["x-api-key"], undefined);
    equal(got.headers["anthropic-version"], undefined);
    equal(got.headers["anthropic-beta"], "x-2025");
    const sent = JSON.parse(got.body);
    equal(sent.anthropic_version, "vertex-2023-10-16");
    equal(sent.model, undefined);
    equal(sent.context_management, undefined);
    assertEquals(sent.messages, MESSAGE.messages);
    // The fake echoes the authorization it got into the stream: scrubbed on the way back.
    ok(res.body.includes("key was Bearer *"), res.body);
    ok(!res.body.includes(VERTEX_TOKEN));
    for (const [, value] of res.headers) ok(!value.includes(VERTEX_TOKEN));
    // Not streamed: :rawPredict.
    const plain = await env.request(v, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
    equal(plain.status, 200, plain.body);
    ok(env.up.requests.at(-1)!.path.endsWith("@20250929:rawPredict"));
    ok(!plain.body.includes(VERTEX_TOKEN));
    const a = (await activity(env)).instances["inst-v"]!;
    equal(a.requests, 2);
    equal(a.in_flight, 0);
    equal(a.input_tokens, STREAM_USAGE.input + 3);
    equal(a.output_tokens, STREAM_USAGE.output + 4);
  } finally {
    await env.close();
  }
});

Deno.test("proxy with Vertex counts Vertex-shaped model calls, not count-tokens, and forwards other Anthropic paths bare", async () => {
  const v = caller("inst-w");
  const env = await setup([v]);
  try {
    const base = "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models";
    const direct = await env.request(
      v,
      VERTEX_HOST,
      `${base}/claude-haiku-4-5@20251001:rawPredict`,
      {
        body: { anthropic_version: "vertex-2023-10-16", messages: [] },
        headers: { authorization: "Bearer placeholder" },
      },
    );
    equal(direct.status, 200, direct.body);
    equal(env.up.requests.at(-1)!.headers["authorization"], `Bearer ${VERTEX_TOKEN}`);
    ok(!direct.body.includes(VERTEX_TOKEN));
    await env.request(v, VERTEX_HOST, `${base}/count-tokens:rawPredict`, {
      body: { messages: [] },
    });
    equal(env.up.requests.at(-1)!.path, `${base}/count-tokens:rawPredict`);
    const other = await env.request(v, "api.anthropic.com", "/echo");
    equal(other.status, 200);
    const seen = env.up.requests.at(-1)!;
    equal(seen.path, "/echo");
    equal(seen.headers["x-api-key"], undefined);
    equal(seen.headers["authorization"], undefined);
    const a = (await activity(env)).instances["inst-w"]!;
    equal(a.requests, 1, "only the :rawPredict call is a model call");
    equal(a.input_tokens, 3);
  } finally {
    await env.close();
  }
});

Deno.test("proxy refuses a model id that would change the Vertex path, before any upstream call", async () => {
  const v = caller("inst-x");
  const env = await setup([v]);
  try {
    for (const model of ["../../v1/projects/other/x", "claude?x=1", "c%2f..", "c#x"]) {
      const res = await env.request(v, "api.anthropic.com", "/v1/messages", {
        body: { ...MESSAGE, model },
      });
      equal(res.status, 400, model);
      ok(res.body.includes("cannot send this call to Vertex AI"), res.body);
    }
    equal(env.up.requests.length, 0);
    equal((await activity(env)).instances["inst-x"]!.in_flight, 0);
  } finally {
    await env.close();
  }
});

Deno.test("proxy fails closed with 502 for pins to missing accounts and to another auth mode", async () => {
  const CASES: [Caller, string][] = [
    [caller("p1", { pins: { claude: "nobody" } }), 'account "nobody" for anthropic'],
    [caller("p2", { templateAccounts: { claude: "gone" } }), `template's account "gone"`],
    [
      caller("p3", { templateAccounts: { claude: "key" }, pins: { claude: "sub" } }),
      "uses oauth but this instance was built for api_key",
    ],
    [
      caller("p4", { pins: { claude: "key" } }),
      "uses api_key but this instance was built for vertex",
    ],
  ];
  const env = await setup(CASES.map(([c]) => c));
  try {
    for (const [who, why] of CASES) {
      const res = await env.request(who, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
      equal(res.status, 502, who.name);
      ok(res.body.includes(why), `${who.name}: ${res.body}`);
    }
    equal(env.up.requests.length, 0, "nothing reached an upstream");
    // The same pin on an instance built for API keys works, with the pinned key.
    const good = caller("p5", { templateAccounts: { claude: "key" }, pins: { claude: "key2" } });
    env.callers.instances.push(good);
    const res = await env.request(good, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
    equal(res.status, 200, res.body);
    equal(env.up.requests.at(-1)!.headers["x-api-key"], "sk-ant-api03-REAL-key2");
    ok(!res.body.includes("REAL-key2"));
  } finally {
    await env.close();
  }
});

Deno.test("proxy applies tools' bearer, header and basic rules from tool YAML, exact before wildcard", async () => {
  const t = caller("inst-t");
  const env = await setup([t]);
  try {
    const bearer = await env.request(t, "api.tooltest.dev", "/echo");
    equal(bearer.status, 200, bearer.body);
    equal(env.up.requests.at(-1)!.headers["authorization"], `Bearer ${TOOL_TOKEN}`);
    ok(!bearer.body.includes(TOOL_TOKEN), "the echo is scrubbed");
    await env.request(t, "a.wild.tooltest.dev", "/echo");
    equal(env.up.requests.at(-1)!.headers["x-tool-key"], `key-${TOOL_TOKEN}`);
    equal(env.up.requests.at(-1)!.headers["authorization"], undefined);
    const basic = await env.request(t, "git.tooltest.dev", "/echo", {
      headers: { authorization: "Basic " + btoa("guest:placeholder") },
    });
    equal(basic.status, 200);
    equal(atob(env.up.requests.at(-1)!.headers["authorization"]!.slice(6)), `bot:${TOOL_PW}`);
    ok(basic.body.includes("authorization"), basic.body);
    ok(!basic.body.includes(btoa(`bot:${TOOL_PW}`)), "the echoed Basic header is scrubbed");
  } finally {
    await env.close();
  }
});

Deno.test("proxy gives a caller without a grant no Vertex token and no tool credential", async () => {
  const s = caller("stranger", { grant: [] });
  const env = await setup([s]);
  try {
    const res = await env.request(s, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
    equal(res.status, 200, res.body);
    const got = env.up.requests.at(-1)!;
    equal(got.path, "/v1/messages", "not translated for Vertex");
    equal(got.headers["x-api-key"], "sk-ant-placeholder");
    equal(got.headers["authorization"], undefined);
    await env.request(s, "api.tooltest.dev", "/echo");
    equal(env.up.requests.at(-1)!.headers["authorization"], undefined);
  } finally {
    await env.close();
  }
});

Deno.test("proxy runs the token command again after Vertex answers 401", async () => {
  const v = caller("inst-r");
  const dir = await Deno.makeTempDir();
  const counter = `${dir}/n`;
  const script = `const f=${JSON.stringify(counter)};let n=0;` +
    `try{n=Number(Deno.readTextFileSync(f))}catch{};n++;Deno.writeTextFileSync(f,String(n));` +
    `console.log("ya29.RUN-"+n)`;
  const env = await setup([v], [Deno.execPath(), "eval", script]);
  try {
    const first = await env.request(v, "api.anthropic.com", "/v1/messages", {
      body: { ...MESSAGE, model: "claude-unauthorized" },
    });
    // refused with RUN-1, sent once more with RUN-2 (refused too: the guest gets that answer)
    equal(first.status, 401);
    equal(env.up.requests.at(-2)!.headers["authorization"], "Bearer ya29.RUN-1");
    equal(env.up.requests.at(-1)!.headers["authorization"], "Bearer ya29.RUN-2");
    const second = await env.request(v, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
    equal(second.status, 200, second.body);
    equal(env.up.requests.at(-1)!.headers["authorization"], "Bearer ya29.RUN-2");
    const again = await env.request(v, "api.anthropic.com", "/v1/messages", {
      body: { ...MESSAGE, model: "claude-unauthorized" },
    });
    equal(again.status, 401);
    equal(env.up.requests.at(-1)!.headers["authorization"], "Bearer ya29.RUN-2");
    equal(Deno.readTextFileSync(counter), "2", "a second 401 within the ttl runs nothing");
    const third = await env.request(v, "api.anthropic.com", "/v1/messages", { body: MESSAGE });
    equal(third.status, 200);
    equal(env.up.requests.at(-1)!.headers["authorization"], "Bearer ya29.RUN-2", "cached again");
  } finally {
    await env.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("proxy lists account names, kinds and defaults on GET /accounts, never values", async () => {
  const env = await setup([]);
  try {
    const res = await fetch(`http://127.0.0.1:${env.proxy.addrs.health[0]!.port}/accounts`);
    equal(res.status, 200);
    const text = await res.text();
    assertEquals(JSON.parse(text).anthropic, {
      default: null,
      accounts: [
        { name: "key", kind: "api_key" },
        { name: "key2", kind: "api_key" },
        { name: "sub", kind: "oauth" },
        { name: "gcp", kind: "vertex" },
      ],
    });
    for (const v of ["REAL", "my-proj", "eval"]) ok(!text.includes(v), v);
  } finally {
    await env.close();
  }
});
