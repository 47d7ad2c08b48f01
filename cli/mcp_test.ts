import assert from "node:assert/strict";
import { contextFrom, enterMode, unionGrants } from "./permissions.ts";
import { SessionLocks } from "../mcp/host/session_locks.ts";
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

// The mcp mode's grants are enough for the exact liveness test (a lock on the session file
// another process holds, mcp/host/session_locks.ts), and /proc stays out of reach.
const LIVE_HOME = Deno.makeTempDirSync({ prefix: "isx-mcp-perm-" });
const LIVE_CTX = contextFrom((k) => ({ HOME: LIVE_HOME } as Record<string, string>)[k], {
  cwd: LIVE_HOME,
  uid: Deno.uid() ?? 0,
  programDir: CTX.programDir,
  execPath: Deno.execPath(),
  socket: CTX.socket,
});
const SESSIONS = `${LIVE_CTX.stateDir}/mcp/sessions`;
Deno.mkdirSync(SESSIONS, { recursive: true });
// outside the test's narrowed permissions
globalThis.addEventListener("unload", () => Deno.removeSync(LIVE_HOME, { recursive: true }));

Deno.test({
  name: "enterMode mcp: tells a live session from a killed one by its lock; /proc stays denied",
  permissions: asTestPermissions(unionGrants(LIVE_CTX)),
  async fn() {
    const holder = new URL("../tests/helpers/session_holder.ts", import.meta.url).pathname;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        `--allow-read=${SESSIONS}`,
        `--allow-write=${SESSIONS}`,
        holder,
        SESSIONS,
        "7-7",
      ],
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    try {
      const r = child.stdout.getReader();
      assert.equal(new TextDecoder().decode((await r.read()).value).trim(), "locked");
      r.releaseLock();
      enterMode("mcp", LIVE_CTX);
      const locks = new SessionLocks(SESSIONS);
      locks.start("8-8");
      assert.equal(locks.alive("7-7"), true);
      for (const p of [`/proc/${child.pid}/stat`, "/proc/self/stat", `/proc/${Deno.pid}/stat`]) {
        assert.throws(() => Deno.readTextFileSync(p), Deno.errors.NotCapable);
      }
      child.kill("SIGKILL");
      await child.status;
      assert.equal(locks.alive("7-7"), false);
      locks.stop();
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* already dead */ }
      await child.status;
      await child.stdout.cancel().catch(() => {});
    }
  },
});
