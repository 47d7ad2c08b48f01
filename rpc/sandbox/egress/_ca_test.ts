import assert from "node:assert/strict";
import {
  caFingerprint,
  ensureCa,
  forgetEgress,
  loadCa,
  SecretValue,
  secretValues,
  writeSecretsFile,
} from "./_ca.ts";
import { pickSubnet } from "./_bridge.ts";
import { IsbError } from "../../errors.ts";
import type { SecretBinding } from "../spec/egress.ts";

const BINDING: SecretBinding = {
  env: "TOKEN",
  secret: "MY_TOKEN",
  hosts: [{ host: "api.example.com", suffix: false, port: 443 }],
  placeholder: "isb_placeholder_00",
};

Deno.test("SecretValue never shows its value when printed or serialised", () => {
  const v = new SecretValue("hunter2-secret");
  assert.ok(!Deno.inspect(v).includes("hunter2"));
  assert.ok(!JSON.stringify({ v }).includes("hunter2"));
  assert.ok(!String(v).includes("hunter2"));
  assert.equal(v.reveal(), "hunter2-secret");
});

Deno.test("secretValues reads the SECRET name from the environment and refuses a missing one", () => {
  const values = secretValues([BINDING], { MY_TOKEN: "v1" });
  assert.equal(values.get("TOKEN")?.reveal(), "v1");
  const err = (() => {
    try {
      secretValues([BINDING], { TOKEN: "wrong-name" });
    } catch (e) {
      return e;
    }
  })();
  assert.ok(err instanceof IsbError && err.code === "invalid");
  assert.equal(
    err.message,
    "egress secret TOKEN: MY_TOKEN is not set in the environment of isb rpc",
  );
});

Deno.test("ensureCa creates the CA once, private, and writeSecretsFile writes 0600 JSON", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const [a, b] = await Promise.all([
      ensureCa(dir, "isbbrx00000001"),
      ensureCa(dir, "isbbrx00000001"),
    ]);
    assert.equal(a.certPem, b.certPem, "a concurrent maker uses the winner's CA");
    assert.equal((await loadCa(dir, "isbbrx00000001"))?.certPem, a.certPem);
    assert.equal((await Deno.stat(`${dir}/egress/isbbrx00000001/ca.key`)).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(`${dir}/egress/isbbrx00000001`)).mode! & 0o777, 0o700);
    assert.match(await caFingerprint(a.certPem), /^[0-9a-f]{16}$/);
    await writeSecretsFile(dir, {
      bridge: "isbbrx00000001",
      owner: "default/web",
      secrets: [BINDING],
      values: secretValues([BINDING], { MY_TOKEN: "v1" }),
    });
    const path = `${dir}/egress/isbbrx00000001/secrets.json`;
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
    assert.deepEqual(JSON.parse(await Deno.readTextFile(path)), {
      instance: "default/web",
      secrets: [{
        env: "TOKEN",
        placeholder: "isb_placeholder_00",
        hosts: ["api.example.com:443"],
        value: "v1",
      }],
    });
    await forgetEgress(dir, "isbbrx00000001");
    assert.equal(await loadCa(dir, "isbbrx00000001"), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pickSubnet takes a stable free /24 from the pool and refuses a bad pool", () => {
  const first = pickSubnet("10.78.0.0/16", "isbbrx0a000000", []);
  assert.match(first, /^10\.78\.\d+\.1\/24$/);
  assert.equal(pickSubnet("10.78.0.0/16", "isbbrx0a000000", []), first);
  const taken = pickSubnet("10.78.0.0/16", "isbbrx0a000000", [first]);
  assert.notEqual(taken, first);
  assert.throws(() => pickSubnet("10.78.0.0/24", "x", []), IsbError);
});
