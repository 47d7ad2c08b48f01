import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { InstanceSecret, secretStamp } from "./secret.ts";

Deno.test("InstanceSecret is 64 random hex characters, new each time", () => {
  const a = InstanceSecret.generate(), b = InstanceSecret.generate();
  assert.match(a.reveal(), /^[0-9a-f]{64}$/);
  assert.notEqual(a.reveal(), b.reveal());
});

Deno.test("InstanceSecret never prints its value", () => {
  const s = InstanceSecret.generate();
  for (const shown of [JSON.stringify({ s }), Deno.inspect(s), String(s), `${s}`]) {
    assert.ok(!shown.includes(s.reveal()), shown);
  }
});

Deno.test("secretStamp records the SHA-256 of the value", () => {
  const s = new InstanceSecret("abc");
  assert.deepEqual(secretStamp(s), {
    "user.incus-spawn.instance-secret-sha256": createHash("sha256").update("abc").digest("hex"),
  });
});
