import { deepStrictEqual as assertEquals, equal, ok, rejects, throws } from "node:assert/strict";
import { loadCredentials, parseCredentials } from "./credentials.ts";
import { hostOnly, matchDomain, Policy } from "./policy.ts";
import { applyHeaderOps, type HeaderOp } from "../relay/rewrite.ts";
import type { Secret } from "./secret.ts";
import { IsbError } from "../../rpc/mod.ts";

const FILE = `
anthropic:
  default: personal
  accounts:
    personal: { api_key: sk-ant-api03-PERSONAL }
    work: { oauth_token: sk-ant-oat01-WORK }
openai:
  accounts:
    main: { api_key: sk-proj-OPENAI }
github:
  accounts:
    me: { token: ghp_GITHUB }
custom:
  - { domain: api.example.com, header: X-Api-Key, value: EXACT }
  - { domain: "*.example.com", bearer: WILD }
  - { domain: "*.deep.example.com", bearer: DEEPER }
  - { domain: git.example.net, basic: { user: bob, password: PW } }
`;

const policy = new Policy(parseCredentials(FILE), { domains: ["registry.npmjs.org"] });

function headersFor(
  host: string,
  path = "/",
  pins: Record<string, string> = {},
  init: HeadersInit = {},
  template: Record<string, string> = {},
) {
  const r = policy.route({ host, path }, { pins, templateAccounts: template, grant: "all" });
  if (r.kind !== "forward") throw new TypeError(r.message);
  const h = new Headers(init);
  applyHeaderOps(h, r.ops as HeaderOp[]);
  return { h, r };
}

Deno.test("Policy.route injects the default Anthropic API key and marks /v1/messages a model call", () => {
  const { h, r } = headersFor("api.anthropic.com:443", "/v1/messages?beta=true", {}, {
    "x-api-key": "sk-ant-placeholder",
  });
  equal(h.get("x-api-key"), "sk-ant-api03-PERSONAL");
  equal(r.kind === "forward" && r.model, "anthropic");
});

Deno.test("Policy.route uses a pinned OAuth account: x-api-key dropped, Bearer added", () => {
  const { h } = headersFor("api.anthropic.com", "/v1/messages", { claude: "work" }, {
    "x-api-key": "sk-ant-placeholder",
  }, { claude: "work" });
  equal(h.get("x-api-key"), null);
  equal(h.get("authorization"), "Bearer sk-ant-oat01-WORK");
});

Deno.test("Policy.route fails closed for a pin to a missing account", () => {
  for (const pins of [{ anthropic: "nope" }, { github: "nope" }, { openai: "gone" }]) {
    const host = "github" in pins
      ? "api.github.com"
      : "openai" in pins
      ? "api.openai.com"
      : "api.anthropic.com";
    const r = policy.route({ host, path: "/v1/messages" }, { pins, grant: "all" });
    equal(r.kind, "fail");
    equal(r.kind === "fail" && r.status, 502);
  }
});

Deno.test("Policy.route counts only model paths", () => {
  const cases: [string, string, string | undefined][] = [
    ["api.anthropic.com", "/v1/messages", "anthropic"],
    ["api.anthropic.com", "/v1/messages/count_tokens", undefined],
    ["api.anthropic.com", "/api/oauth/profile", undefined],
    ["api.openai.com", "/v1/responses", "openai"],
    ["api.openai.com", "/v1/chat/completions", "openai"],
    ["api.openai.com", "/v1/models", undefined],
    ["github.com", "/v1/messages", undefined],
  ];
  for (const [host, path, model] of cases) {
    const r = policy.route({ host, path }, { grant: "all" });
    equal(r.kind === "forward" ? r.model : "fail", model, `${host}${path}`);
  }
});

Deno.test("Policy.route gives git on github.com Basic auth and the API a Bearer token", () => {
  const git = headersFor("github.com", "/o/r.git/info/refs").h.get("authorization")!;
  equal(atob(git.slice(6)), "x-access-token:ghp_GITHUB");
  equal(headersFor("api.github.com").h.get("authorization"), "Bearer ghp_GITHUB");
  equal(headersFor("api.openai.com").h.get("authorization"), "Bearer sk-proj-OPENAI");
});

Deno.test("Policy.route picks the exact custom rule, then the most specific wildcard", () => {
  equal(headersFor("api.example.com").h.get("x-api-key"), "EXACT");
  equal(headersFor("api.example.com").h.get("authorization"), null);
  equal(headersFor("cdn.example.com").h.get("authorization"), "Bearer WILD");
  equal(headersFor("a.deep.example.com").h.get("authorization"), "Bearer DEEPER");
  equal(atob(headersFor("git.example.net").h.get("authorization")!.slice(6)), "bob:PW");
  equal(headersFor("registry.npmjs.org").h.get("authorization"), null);
});

Deno.test("Policy lists domains, DNS names and certificate names", () => {
  ok(policy.domains.includes("*.example.com"));
  ok(policy.dnsNames().includes("example.com"));
  ok(policy.certNames().includes("*.github.com"));
  ok(policy.covers("codeload.github.com"));
  ok(!policy.covers("evilgithub.com"));
  // 8 values, plus the Basic header of the fixed-user rule (bob:PW), scrubbed as one.
  equal(policy.secrets().length, 9);
  ok(policy.secrets().some((s) => s.reveal() === btoa("bob:PW")));
});

Deno.test("matchDomain and hostOnly follow the wildcard and authority rules", () => {
  ok(matchDomain("*.x.com", "a.x.com"));
  ok(!matchDomain("*.x.com", "x.com"));
  ok(!matchDomain("x.com", "a.x.com"));
  equal(hostOnly("API.Anthropic.com:443"), "api.anthropic.com");
  equal(hostOnly("[::1]:8080"), "::1");
  equal(hostOnly("example.com."), "example.com");
});

Deno.test("parseCredentials rejects bad files without quoting values", () => {
  const bad = [
    "anthropic: { accounts: { a: { api_key: sk-SECRET-1, extra: 1 } } }",
    "anthropic: { default: b, accounts: { a: { api_key: sk-SECRET-1 } } }",
    "anthropic: [sk-SECRET-1",
    "unknown: { x: sk-SECRET-1 }",
  ];
  for (const text of bad) {
    throws(() => parseCredentials(text), (e: unknown) => {
      ok(e instanceof IsbError);
      ok(!e.message.includes("SECRET"), e.message);
      return true;
    });
  }
});

Deno.test("loadCredentials refuses a file wider than 0600 and reads a missing one as empty", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/credentials.yaml`;
    equal((await loadCredentials(path)).anthropic.accounts.size, 0);
    await Deno.writeTextFile(path, FILE, { mode: 0o644 });
    await Deno.chmod(path, 0o644);
    await rejects(
      loadCredentials(path),
      (e: unknown) => e instanceof IsbError && e.code === "forbidden",
    );
    await Deno.chmod(path, 0o600);
    const c = await loadCredentials(path);
    equal((c.github.accounts.get("me")!.value as Secret).reveal(), "ghp_GITHUB");
    const shown = Deno.inspect(c, { depth: 10 }) + JSON.stringify(c.custom);
    for (const v of ["PERSONAL", "WORK", "OPENAI", "GITHUB", "EXACT", "WILD", "PW"]) {
      ok(!shown.includes(v), v);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("Policy with no accounts relays without credentials", () => {
  const empty = new Policy(parseCredentials(""));
  const r = empty.route({ host: "api.anthropic.com", path: "/v1/messages" }, { grant: "all" });
  assertEquals(r, { kind: "forward", namespace: "anthropic", model: "anthropic", ops: [] });
});

Deno.test("Policy.route gives a caller only the namespaces its grant covers", () => {
  const hosts: [string, string][] = [
    ["api.anthropic.com", "anthropic"],
    ["api.openai.com", "openai"],
    ["api.github.com", "github"],
    ["github.com", "github"],
    ["api.example.com", "custom"],
    ["x.example.com", "custom"],
  ];
  const grants: (readonly ("anthropic" | "openai" | "github" | "custom")[])[] = [
    [],
    ["github"],
    ["anthropic", "custom"],
  ];
  for (const grant of grants) {
    for (const [host, name] of hosts) {
      const r = policy.route({ host, path: "/v1/messages" }, { grant });
      if (r.kind !== "forward") throw new TypeError(r.message);
      const h = new Headers({ "x-api-key": "sk-ant-placeholder", authorization: "Bearer ph" });
      applyHeaderOps(h, r.ops as HeaderOp[]);
      const injected = r.ops.length > 0;
      equal(injected, grant.includes(name as never), `${grant.join(",")} on ${host}`);
      if (!injected) {
        equal(h.get("x-api-key"), "sk-ant-placeholder");
        equal(h.get("authorization"), "Bearer ph");
      }
    }
  }
});

Deno.test("Policy.route with no grant relays even a pin to a missing account", () => {
  const r = policy.route({ host: "api.anthropic.com", path: "/v1/messages" }, {
    grant: [],
    pins: { anthropic: "nope" },
  });
  assertEquals(r, { kind: "forward", namespace: "anthropic", model: "anthropic", ops: [] });
});
