import assert from "node:assert/strict";
import { desiredToJson } from "./_desired.ts";
import { run } from "../../../tests/helpers/resolve_fixture.ts";

Deno.test("resolve keeps secret environment values out of desiredToJson", () => {
  const oci = run({ image: "docker:app", environment: { T: { secret: "tok" } } }, {
    secretValues: { tok: "s3cr3t" },
  });
  assert.equal(oci.config["environment.T"], "s3cr3t");
  const sys = run({ environment: { T: { secret: "tok" } } }, { secretValues: { tok: "s3cr3t" } });
  assert.equal(sys.config["environment.T"], undefined);
  assert.equal(sys.exec.env?.T, "s3cr3t");
  for (const d of [oci, sys]) assert.ok(!JSON.stringify(desiredToJson(d)).includes("s3cr3t"));
});

Deno.test("desiredToJson has exactly the §6.6 keys", () => {
  const j = desiredToJson(run({ ports: ["5173-5180:5173"], exec: { login: true }, user: "dev" }));
  assert.deepStrictEqual(Object.keys(j).sort(), [
    "config",
    "devices",
    "exec",
    "image",
    "instance_type",
    "name",
    "owners",
    "pool",
    "profiles",
    "ready",
    "volumes",
  ]);
  assert.deepStrictEqual(j.exec, { user: "dev", login: true });
  assert.equal((j.devices as Record<string, { search?: number }>)["port-host-5173"]!.search, 7);
});
