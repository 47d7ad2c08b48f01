import assert from "node:assert/strict";
import { sanitizeName, serviceSandboxName, volumeIncusName } from "./_names.ts";

const SANITIZE = [
  ["Demo App", "demo-app"],
  ["My Project!", "my-project"],
  ["123", "isb-123"],
  ["--a--b--", "a-b"],
  ["", "isb"],
  ["_x", "x"],
  ["ÄÖ", "isb"],
];

for (const [input, want] of SANITIZE) {
  Deno.test(`sanitizeName turns ${JSON.stringify(input)} into ${want}`, () => {
    assert.equal(sanitizeName(input!), want);
  });
}

Deno.test("serviceSandboxName is <project>-<sanitized service>", () => {
  assert.equal(serviceSandboxName("demo", "Worker_1"), "demo-worker-1");
});

Deno.test("volumeIncusName prefixes the project unless external", () => {
  assert.equal(volumeIncusName("app", "cache", false), "app_cache");
  assert.equal(volumeIncusName("app", "shared", true), "shared");
});
