import { deepStrictEqual as assertEquals } from "node:assert/strict";
import type { AccountCatalogue } from "../proxy/mod.ts";
import { resolvedFor } from "./proxy_account.ts";

const CATALOGUE: AccountCatalogue = {
  anthropic: {
    default: null,
    accounts: [{ name: "key", kind: "api_key" }, { name: "sub", kind: "oauth" }],
  },
  openai: { default: null, accounts: [] },
  github: {
    default: "me",
    accounts: [{ name: "me", kind: "token" }, { name: "bot", kind: "token" }],
  },
};

Deno.test("resolvedFor shows what the proxy will use, and why it would refuse", () => {
  assertEquals(resolvedFor(CATALOGUE, {}, {}), {
    claude: { account: "sub", kind: "oauth", source: "default" },
    openai: null,
    github: { account: "me", kind: "token", source: "default" },
  });
  const r = resolvedFor(CATALOGUE, { claude: "key", github: "bot" }, { claude: "key" });
  assertEquals(r.claude, { account: "key", kind: "api_key", source: "pin" });
  assertEquals(r.github, { account: "bot", kind: "token", source: "pin" });
  const bad = resolvedFor(CATALOGUE, { claude: "key" }, {});
  assertEquals(
    bad.claude && "error" in bad.claude && bad.claude.error.includes("built for oauth"),
    true,
  );
  const gone = resolvedFor(CATALOGUE, { github: "gone" }, {});
  assertEquals(gone.github && "error" in gone.github, true);
});
