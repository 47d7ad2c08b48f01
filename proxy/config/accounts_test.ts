import { deepStrictEqual as assertEquals, equal, ok, throws } from "node:assert/strict";
import { defaultAccount, parseAccountPairs, resolveAccount } from "./accounts.ts";
import { parseCredentials } from "./credentials.ts";
import { Policy } from "./policy.ts";
import { applyHeaderOps, type HeaderOp } from "../relay/rewrite.ts";

const FILE = `
anthropic:
  accounts:
    key: { api_key: sk-ant-api03-KEY }
    key2: { api_key: sk-ant-api03-KEY2 }
    sub: { oauth_token: sk-ant-oat01-SUB }
    sub2: { oauth_token: sk-ant-oat01-SUB2 }
github:
  default: me
  accounts:
    me: { token: ghp_ME }
    bot: { token: ghp_BOT }
`;
const creds = parseCredentials(FILE);

Deno.test("resolveAccount follows pin > template > default and fails closed", () => {
  const CASES: {
    ns: "anthropic" | "github";
    pins?: Record<string, string>;
    template?: Record<string, string>;
    want: string;
  }[] = [
    // Anthropic's priority without `default:`: OAuth before an API key.
    { ns: "anthropic", want: "sub" },
    { ns: "anthropic", template: { claude: "key" }, want: "key" },
    { ns: "anthropic", template: { claude: "key" }, pins: { claude: "key2" }, want: "key2" },
    { ns: "anthropic", pins: { anthropic: "sub2" }, want: "sub2" },
    { ns: "anthropic", template: { claude: "sub" }, pins: { claude: "sub2" }, want: "sub2" },
    { ns: "github", want: "me" },
    { ns: "github", template: { github: "bot" }, want: "bot" },
    { ns: "github", template: { github: "bot" }, pins: { github: "me" }, want: "me" },
    // Failing closed: never a fallback.
    { ns: "anthropic", pins: { claude: "gone" }, want: 'error:account "gone"' },
    { ns: "anthropic", template: { claude: "gone" }, want: 'error:the template\'s account "gone"' },
    { ns: "github", template: { github: "bot" }, pins: { github: "x" }, want: 'error:account "x"' },
    // Another auth mode than the instance was built for.
    { ns: "anthropic", pins: { claude: "key" }, want: "error:uses api_key but" },
    {
      ns: "anthropic",
      template: { claude: "key" },
      pins: { claude: "sub" },
      want: "error:uses oauth",
    },
  ];
  for (const c of CASES) {
    const accounts = c.ns === "anthropic" ? creds.anthropic : creds.github;
    const r = resolveAccount(c.ns, accounts as typeof creds.github, {
      pins: c.pins,
      template: c.template,
    });
    const label = JSON.stringify(c);
    if (c.want.startsWith("error:")) {
      ok(r.error?.includes(c.want.slice(6)), `${label}: ${r.error}`);
      equal(r.account, undefined, label);
    } else {
      equal(r.error, undefined, label);
      equal(r.account !== undefined && "name" in r ? r.name : undefined, c.want, label);
    }
  }
});

Deno.test("defaultAccount prefers Vertex, then OAuth, then an API key when no default is named", () => {
  const c = parseCredentials(`
anthropic:
  accounts:
    k: { api_key: sk-K }
    o: { oauth_token: sk-O }
    v: { vertex: { project: my-proj, region: us-east5 } }
`);
  equal(defaultAccount("anthropic", c.anthropic)?.name, "v");
  c.anthropic.accounts.delete("v");
  equal(defaultAccount("anthropic", c.anthropic)?.name, "o");
  c.anthropic.accounts.delete("o");
  equal(defaultAccount("anthropic", c.anthropic)?.name, "k");
});

Deno.test("Policy.route fails closed with 502 for a pin of another Claude auth mode", () => {
  const policy = new Policy(creds);
  const r = policy.route({ host: "api.anthropic.com", path: "/v1/messages" }, {
    grant: "all",
    pins: { claude: "key" },
  });
  equal(r.kind, "fail");
  equal(r.kind === "fail" && r.status, 502);
  const ok2 = policy.route({ host: "api.anthropic.com", path: "/v1/messages" }, {
    grant: "all",
    pins: { claude: "key" },
    templateAccounts: { claude: "key2" },
  });
  equal(ok2.kind, "forward");
  const h = new Headers({ "x-api-key": "sk-ant-placeholder" });
  if (ok2.kind === "forward") applyHeaderOps(h, ok2.ops as HeaderOp[]);
  equal(h.get("x-api-key"), "sk-ant-api03-KEY");
});

Deno.test("parseAccountPairs accepts ns=name and refuses unknown namespaces and bad names", () => {
  assertEquals(parseAccountPairs(["claude=work", "github=me", "codex=a.b"]), {
    claude: "work",
    github: "me",
    openai: "a.b",
  });
  assertEquals(parseAccountPairs(["anthropic=x"]), { claude: "x" });
  for (const bad of ["aws=x", "claude", "claude=", "claude=a b", "claude=../x", "github=$(id)"]) {
    throws(() => parseAccountPairs([bad]), TypeError, bad);
  }
});
