import assert from "node:assert/strict";
import { enterMode, unionGrants } from "./permissions.ts";
import { asTestPermissions, CTX } from "./_perm_fixture.ts";

Deno.test({
  name: "enterMode mcp cannot write its config, read credentials or run a host program",
  permissions: asTestPermissions(unionGrants(CTX)),
  fn() {
    enterMode("mcp", CTX);
    for (const f of ["config.yaml", "mcp.yaml"]) {
      assert.throws(
        () => Deno.writeTextFileSync(`${CTX.configDir}/${f}`, "mcp: {templates: [anything]}\n"),
        Deno.errors.NotCapable,
      );
    }
    assert.throws(
      () => Deno.readTextFileSync(`${CTX.configDir}/credentials.yaml`),
      Deno.errors.NotCapable,
    );
    assert.throws(() => Deno.readTextFileSync(`${CTX.stateDir}/ca/ca.key`), Deno.errors.NotCapable);
    for (const prog of ["sh", "incus", "/usr/bin/deno"]) {
      assert.throws(
        () => new Deno.Command(prog, { args: ["-c", "true"] }).outputSync(),
        Deno.errors.NotCapable,
      );
    }
    const q = (d: Deno.PermissionDescriptor) => Deno.permissions.querySync(d).state;
    assert.equal(q({ name: "read", path: `${CTX.configDir}/mcp.yaml` }), "granted");
    assert.equal(q({ name: "write", path: `${CTX.stateDir}/mcp/mcp.log` }), "granted");
    assert.equal(q({ name: "write", path: `${CTX.stateDir}/mcp/sessions/1-2` }), "granted");
  },
});
