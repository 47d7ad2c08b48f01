import { equal, ok } from "node:assert/strict";
import { parseCredentials } from "./credentials.ts";
import { dumpCredentials } from "./dump.ts";

Deno.test("dumpCredentials shows names, kinds and lengths, never a value", () => {
  const c = parseCredentials(`
anthropic:
  default: work
  accounts:
    work: { oauth_token: sk-ant-oat01-SECRETVALUE }
github:
  accounts: { me: { token: ghp_SECRETTOKEN } }
custom:
  - { domain: api.example.com, header: X-Api-Key, value: SECRETHEADER }
  - { domain: git.example.net, basic: { user: bob, password: SECRETPW } }
`);
  const d = dumpCredentials(c);
  const text = JSON.stringify(d);
  ok(!text.includes("SECRET"), text);
  const a = d.anthropic as { default: string; accounts: Record<string, unknown> };
  equal(a.default, "work");
  equal(JSON.stringify(a.accounts.work), JSON.stringify({ kind: "oauth", length: 24 }));
  ok(text.includes('"header":"X-Api-Key"'), text);
  ok(text.includes('"user":"bob"'), text);
  equal(
    (d.openai as { accounts: object }).accounts &&
      Object.keys((d.openai as { accounts: object }).accounts).length,
    0,
  );
});
