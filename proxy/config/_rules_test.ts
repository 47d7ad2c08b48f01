import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import type { CustomRule } from "./credentials.ts";
import { basicHeaderSecrets, ruleFor, ruleOps } from "./_rules.ts";
import { Secret } from "./secret.ts";

const rule = (domain: string, value: string): CustomRule => ({
  domain,
  kind: "bearer",
  value: new Secret(value),
});

Deno.test("ruleFor picks the exact domain, then the longest wildcard, then the first listed", () => {
  // The credentials file's rules come first, then the tools'.
  const rules = [
    rule("*.svc.dev", "file-wild"),
    rule("api.svc.dev", "file-exact"),
    rule("api.svc.dev", "tool-exact"),
    rule("*.deep.svc.dev", "tool-deeper"),
    rule("*.svc.dev", "tool-wild"),
  ];
  const CASES: [string, string | undefined][] = [
    ["api.svc.dev", "file-exact"],
    ["x.svc.dev", "file-wild"],
    ["a.deep.svc.dev", "tool-deeper"],
    ["svc.dev", undefined],
    ["evilsvc.dev", undefined],
  ];
  for (const [host, want] of CASES) {
    const got = ruleFor(rules, host);
    equal(got && "value" in got ? (got.value as Secret).reveal() : undefined, want, host);
  }
});

Deno.test("ruleOps turns each rule kind into its header operation", () => {
  const v = new Secret("V");
  assertEquals(ruleOps([{ domain: "a.b", kind: "header", header: "X-K", value: v }], "a.b"), [
    { op: "set", name: "X-K", value: v },
  ]);
  assertEquals(ruleOps([{ domain: "a.b", kind: "basic", user: "u", value: v }], "a.b"), [
    { op: "basic", value: v, user: "u" },
  ]);
  assertEquals(ruleOps([], "a.b"), []);
  equal(
    basicHeaderSecrets([{ domain: "a.b", kind: "basic", user: "u", value: v }])[0]!.reveal(),
    btoa("u:V"),
  );
});
