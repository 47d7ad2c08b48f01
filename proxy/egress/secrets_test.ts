import assert from "node:assert/strict";
import { parseEgressFile } from "./secrets.ts";

const FILE = {
  instance: "default/web",
  secrets: [
    {
      env: "TOKEN",
      placeholder: "isx-ph-00000001",
      hosts: ["API.x.dev:443", "*.y.dev."],
      value: "REAL-1",
    },
    { env: "EMPTY", placeholder: "isx-ph-00000002", hosts: ["z.dev"], value: "" },
  ],
  written_by: "isb 1.0",
};

Deno.test("parseEgressFile wraps values, normalises hosts, drops empty values and ignores unknown fields", () => {
  const e = parseEgressFile("isxegress0", JSON.stringify(FILE));
  assert.equal(e.instance, "web");
  assert.equal(e.secrets.length, 1);
  assert.deepEqual(e.secrets[0]!.hosts, ["api.x.dev", "*.y.dev"]);
  assert.equal(e.secrets[0]!.value.reveal(), "REAL-1");
  assert.ok(!JSON.stringify(e).includes("REAL-1"));
});

Deno.test("parseEgressFile refuses a bad file by field, never quoting a value", () => {
  const s0 = FILE.secrets[0]!;
  const CASES: [string, string][] = [
    ["{", "not JSON"],
    [JSON.stringify({ ...FILE, instance: "" }), "instance: expected"],
    [JSON.stringify({ ...FILE, secrets: {} }), "secrets: expected a list"],
    [
      JSON.stringify({ ...FILE, secrets: [{ ...s0, placeholder: "short" }] }),
      "secrets.0.placeholder",
    ],
    [JSON.stringify({ ...FILE, secrets: [{ ...s0, hosts: [""] }] }), "secrets.0.hosts.0"],
    [JSON.stringify({ ...FILE, secrets: [{ ...s0, value: 7 }] }), "secrets.0.value"],
  ];
  for (const [text, msg] of CASES) {
    assert.throws(() => parseEgressFile("isxegress0", text), (e: unknown) => {
      assert.ok(e instanceof TypeError, String(e));
      assert.ok(e.message.startsWith("egress secrets of isxegress0: "), e.message);
      assert.ok(e.message.includes(msg), `${e.message} lacks ${msg}`);
      assert.ok(!e.message.includes("REAL-1"), e.message);
      return true;
    }, text);
  }
});
