import { deepStrictEqual as assertEquals, equal, ok, throws } from "node:assert/strict";
import { CREDENTIALS_TEMPLATE } from "../../mcp/host/config.ts";
import { IsbError } from "../../rpc/mod.ts";
import { isEmptyYaml, missingNamespaces, parseCredentials } from "./credentials.ts";
import type { Secret } from "./secret.ts";

Deno.test("parseCredentials takes the all-comments skeleton isx init writes as no credentials", () => {
  const c = parseCredentials(CREDENTIALS_TEMPLATE);
  assertEquals(missingNamespaces(c), ["anthropic", "openai", "github"]);
  equal(c.custom.length, 0);
});

Deno.test("parseCredentials takes empty and blank texts as no credentials", () => {
  for (const text of ["", "\n", "  \n\t\n", "# only\n  # comments\n"]) {
    assertEquals(missingNamespaces(parseCredentials(text)), ["anthropic", "openai", "github"]);
  }
});

Deno.test("isEmptyYaml is false as soon as one line holds YAML", () => {
  ok(isEmptyYaml("# a\n\n  # b"));
  equal(isEmptyYaml("# a\nopenai: {}\n"), false);
  equal(isEmptyYaml("---\n"), false);
});

Deno.test("missingNamespaces names only the namespaces without an account", () => {
  const c = parseCredentials(
    "# personal key\nanthropic:\n  accounts:\n    me: { api_key: sk-ant-api03-real }\n",
  );
  assertEquals(missingNamespaces(c), ["openai", "github"]);
});

Deno.test("parseCredentials still refuses broken YAML without quoting a value", () => {
  for (
    const text of [
      "anthropic:\n  accounts: { me: { api_key: sk-ant-SECRET\n",
      // an unquoted value YAML reads as a tag or an alias: js-yaml's reason names it
      "anthropic:\n  accounts:\n    me: { api_key: !sk-ant-SECRET }\n",
      "anthropic:\n  accounts:\n    me: { api_key: *sk-ant-SECRET }\n",
      "anthropic:\n  accounts:\n    me: { api_key: a }\n    me: { api_key: sk-ant-SECRET }\n",
    ]
  ) {
    throws(() => parseCredentials(text), (e: unknown) => {
      ok(e instanceof IsbError && e.code === "parse", String(e));
      ok(/^read credentials: invalid YAML: line \d+: /.test(e.message), e.message);
      ok(!e.message.includes("SECRET") && !e.message.includes("\n"), e.message);
      return true;
    }, text);
  }
});

Deno.test("parseCredentials refuses a wrong shape by field, never quoting a value", () => {
  const CASES: [string, string][] = [
    [
      "anthropic: { accounts: { a: { api_key: SECRET-1, oauth_token: SECRET-2 } } }",
      "anthropic.accounts.a: expected exactly one of",
    ],
    [
      "anthropic: { accounts: { a: { api_key: SECRET-1, extra: SECRET-2 } } }",
      "anthropic.accounts.a.extra: unknown field",
    ],
    ["anthropic: { accounts: { a: { api_key: '' } } }", "anthropic.accounts.a.api_key: expected"],
    [
      "anthropic: { accounts: { v: { vertex: { project: P, region: us-east5 } } } }",
      "anthropic.accounts.v.vertex.project",
    ],
    [
      "anthropic: { accounts: { v: { vertex: { project: my-proj, region: us-east5, token_ttl_seconds: 0 } } } }",
      "token_ttl_seconds: expected an integer from 1 to 86400",
    ],
    [
      "anthropic: { accounts: { v: { vertex: { project: my-proj, region: us-east5, token_command: [] } } } }",
      "token_command: expected at least 1 item",
    ],
    ["openai: { accounts: { m: { token: SECRET-1 } } }", "openai.accounts.m.token: unknown field"],
    ["github: { accounts: [SECRET-1] }", "github.accounts: expected a mapping"],
    ["gitlab: { accounts: {} }", "gitlab: unknown field"],
    [
      "custom: [{ domain: a.b, bearer: SECRET-1, value: SECRET-2 }]",
      "custom.0.value: unknown field",
    ],
    [
      "custom: [{ domain: a.b, header: X-K }]",
      "custom.0.value: expected a value or { command: [program, args…] }",
    ],
    [
      "custom: [{ domain: a.b, basic: { user: u } }]",
      "custom.0.basic.password: expected a value or { command",
    ],
    ["custom: { domain: a.b }", "custom: expected a list"],
    [
      "github: { accounts: { me: { token: { command: [] } } } }",
      "token.command: expected at least 1 item",
    ],
    ["github: { accounts: { me: { token: { command: gh } } } }", "token.command: expected a list"],
    [
      "github: { accounts: { me: { token: { command: [gh], ttl: 0s } } } }",
      "token.ttl: expected a duration from 1s to 24h",
    ],
    [
      "github: { accounts: { me: { token: { command: [gh], shell: SECRET-1 } } } }",
      "token.shell: unknown field",
    ],
    ["SECRET-1", "document: expected a mapping"],
  ];
  for (const [text, msg] of CASES) {
    throws(() => parseCredentials(text), (e: unknown) => {
      ok(e instanceof IsbError && e.code === "invalid", String(e));
      ok(e.message.startsWith("read credentials: "), e.message);
      ok(e.message.includes(msg), `${e.message} lacks ${msg}`);
      ok(!e.message.includes("SECRET"), e.message);
      return true;
    }, text);
  }
});

Deno.test("parseCredentials reads every account kind and custom rule", () => {
  const c = parseCredentials(`
anthropic:
  default: work
  accounts:
    personal: { api_key: k1 }
    work: { oauth_token: k2 }
    gcp:
      vertex: { project: my-proj, region: us-east5, token_command: [gcloud, x], token_ttl_seconds: 60 }
openai: { accounts: { main: { api_key: k3 } } }
github: { accounts: { me: { token: k4 } } }
custom:
  - { domain: API.example.com, header: X-Api-Key, value: k5 }
  - { domain: "*.example.org", bearer: k6 }
  - { domain: git.example.net, basic: { user: bob, password: k7 } }
`);
  equal(c.anthropic.default, "work");
  assertEquals([...c.anthropic.accounts.keys()], ["personal", "work", "gcp"]);
  assertEquals(c.anthropic.accounts.get("gcp"), {
    kind: "vertex",
    vertex: {
      project: "my-proj",
      region: "us-east5",
      tokenCommand: ["gcloud", "x"],
      tokenTtlMs: 60_000,
    },
  });
  equal((c.openai.accounts.get("main")?.value as Secret).reveal(), "k3");
  equal((c.github.accounts.get("me")?.value as Secret).reveal(), "k4");
  assertEquals(c.custom.map((r) => [r.domain, r.kind, (r.value as Secret).reveal()]), [
    ["api.example.com", "header", "k5"],
    ["*.example.org", "bearer", "k6"],
    ["git.example.net", "basic", "k7"],
  ]);
});

Deno.test("parseCredentials takes a command in place of any value, with a ttl (default 5 min)", () => {
  const c = parseCredentials(`
anthropic:
  accounts:
    k: { api_key: { command: [op, read, "op://Private/Anthropic/credential"], ttl: 1h } }
    o: { oauth_token: { command: [secret-tool, lookup, claude, oauth] } }
openai: { accounts: { m: { api_key: { command: [pass, show, openai] } } } }
github: { accounts: { me: { token: { command: [gh, auth, token], ttl: 55m } } } }
custom:
  - { domain: a.dev, header: X-K, value: { command: [bw, get, password, a] } }
  - { domain: b.dev, basic: { user: u, password: { command: [gopass, show, b] } } }
`);
  const cmd = (v: unknown) => v as { kind: string; argv: string[]; ttlMs: number };
  assertEquals(
    cmd(
      c.anthropic.accounts.get("k")!.kind === "api_key" &&
        (c.anthropic.accounts.get("k") as { value: unknown }).value,
    ),
    {
      kind: "command",
      argv: ["op", "read", "op://Private/Anthropic/credential"],
      ttlMs: 3_600_000,
    },
  );
  equal(cmd((c.anthropic.accounts.get("o") as { value: unknown }).value).ttlMs, 300_000);
  assertEquals(cmd(c.github.accounts.get("me")!.value).argv, ["gh", "auth", "token"]);
  equal(cmd(c.github.accounts.get("me")!.value).ttlMs, 55 * 60_000);
  assertEquals(cmd(c.openai.accounts.get("m")!.value).argv, ["pass", "show", "openai"]);
  assertEquals(c.custom.map((r) => cmd(r.value).argv[0]), ["bw", "gopass"]);
});
