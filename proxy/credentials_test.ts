import { deepStrictEqual as assertEquals, equal, ok, throws } from "node:assert/strict";
import { CREDENTIALS_TEMPLATE } from "../mcp/host/config.ts";
import { IsbError } from "../rpc/mod.ts";
import { isEmptyYaml, missingNamespaces, parseCredentials } from "./credentials.ts";

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
  throws(
    () => parseCredentials("anthropic:\n  accounts: { me: { api_key: sk-ant-SECRET\n"),
    (e: unknown) => e instanceof IsbError && e.code === "parse" && !e.message.includes("SECRET"),
  );
});
