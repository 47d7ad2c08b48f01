import assert from "node:assert/strict";
import {
  contextFrom,
  enterMode,
  MODES,
  type PermContext,
  PERMISSIONS,
  unionFlags,
  unionGrants,
} from "./permissions.ts";
import { launchFlags, launchMode } from "./launch.ts";
import { asTestPermissions, CTX, HOME } from "./_perm_fixture.ts";

const state = (d: Deno.PermissionDescriptor) => Deno.permissions.querySync(d).state;

Deno.test("contextFrom resolves XDG defaults under HOME and the isb lock dir under tmp", () => {
  assert.equal(CTX.configDir, `${HOME}/.config/isx`);
  assert.equal(CTX.stateDir, `${HOME}/.local/state/isx`);
  assert.equal(CTX.cacheDir, `${HOME}/.cache/isx`);
  assert.equal(CTX.isbStateDir, `${HOME}/.local/state/isb`);
  assert.equal(CTX.lockDir, "/tmp/isb-1000");
});

Deno.test("unionFlags starts with --no-prompt and lists every mode's read paths", () => {
  const flags = unionFlags(CTX);
  assert.equal(flags[0], "--no-prompt");
  const read = flags.find((f) => f.startsWith("--allow-read="))!.slice("--allow-read=".length);
  for (const mode of MODES) {
    for (const p of PERMISSIONS[mode](CTX).read) {
      assert.ok(read.split(",").includes(p), `${mode}: ${p}`);
    }
  }
});

for (const mode of MODES) {
  Deno.test({
    name: `enterMode ${mode} keeps exactly its own path grants`,
    permissions: asTestPermissions(unionGrants(CTX)),
    fn() {
      enterMode(mode, CTX);
      const want = PERMISSIONS[mode](CTX);
      for (const p of want.read) assert.equal(state({ name: "read", path: p }), "granted", p);
      for (const p of want.write) assert.equal(state({ name: "write", path: p }), "granted", p);
      // Nothing writable outside the mode's own directories.
      for (const p of [`${HOME}/.bashrc`, "/etc/isx-probe", `${HOME}/.ssh/authorized_keys`]) {
        assert.notEqual(state({ name: "write", path: p }), "granted", `${mode} may write ${p}`);
      }
      assert.notEqual(state({ name: "read", path: `${HOME}/.ssh/id_ed25519` }), "granted");
      assert.notEqual(state({ name: "ffi" }), "granted");
      if (want.net !== true) {
        assert.notEqual(state({ name: "net", host: "127.0.0.1:80" }), "granted");
      }
      if (want.env !== true) assert.notEqual(state({ name: "env", variable: "HOME" }), "granted");
    },
  });
}

Deno.test({
  name: "enterMode rpc cannot read the proxy's credentials or the CA key",
  permissions: asTestPermissions(unionGrants(CTX)),
  fn() {
    enterMode("rpc", CTX);
    for (const p of [`${CTX.configDir}/credentials.yaml`, `${CTX.stateDir}/ca/ca.key`]) {
      assert.notEqual(state({ name: "read", path: p }), "granted", p);
    }
  },
});

Deno.test({
  name: "enterMode build reads the CA certificate but not its key nor the credentials",
  permissions: asTestPermissions(unionGrants(CTX)),
  fn() {
    enterMode("build", CTX);
    assert.equal(state({ name: "read", path: `${CTX.stateDir}/ca/ca.crt` }), "granted");
    assert.notEqual(state({ name: "read", path: `${CTX.stateDir}/ca/ca.key` }), "granted");
    assert.notEqual(state({ name: "read", path: `${CTX.configDir}/credentials.yaml` }), "granted");
  },
});

Deno.test({
  name: "enterMode proxy is the only mode that reads the credentials file",
  permissions: asTestPermissions(unionGrants(CTX)),
  fn() {
    enterMode("proxy", CTX);
    assert.equal(state({ name: "read", path: `${CTX.configDir}/credentials.yaml` }), "granted");
    const readers = MODES.filter((m) =>
      PERMISSIONS[m](CTX).read.some((p) =>
        `${CTX.configDir}/credentials.yaml`.startsWith(p.endsWith("/") ? p : p + "/") ||
        p === `${CTX.configDir}/credentials.yaml`
      )
    );
    assert.deepEqual(readers.sort(), ["init", "proxy"]);
  },
});

Deno.test({
  name: "enterMode guest cannot open a network connection",
  permissions: asTestPermissions(unionGrants(CTX)),
  async fn() {
    enterMode("guest", CTX);
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port: 9 }),
      Deno.errors.NotCapable,
    );
    await assert.rejects(fetch("http://127.0.0.1:18080/"), Deno.errors.NotCapable);
  },
});

const AT_HOME: PermContext = { ...CTX, cwd: HOME };

Deno.test({
  name: "enterMode rpc from $HOME without the deny flags fails closed: no key is readable",
  permissions: asTestPermissions(unionGrants(AT_HOME)),
  fn() {
    assert.equal(state({ name: "read", path: `${HOME}/.ssh/id_ed25519` }), "granted");
    enterMode("rpc", AT_HOME);
    for (
      const p of [
        `${HOME}/.ssh/id_ed25519`,
        `${AT_HOME.configDir}/credentials.yaml`,
        `${AT_HOME.stateDir}/ca/ca.key`,
      ]
    ) {
      assert.notEqual(state({ name: "read", path: p }), "granted", p);
    }
    // what rpc keeps besides the cwd
    assert.equal(state({ name: "read", path: AT_HOME.isbStateDir }), "granted");
    assert.equal(state({ name: "read", path: AT_HOME.lockDir }), "granted");
  },
});

Deno.test("launchFlags adds rpc's read denials for isb and isx rpc, and only for them", () => {
  assert.equal(launchMode("isb", undefined), "rpc");
  assert.equal(launchMode("isx", "rpc"), "rpc");
  for (const cmd of [undefined, "proxy", "build", "init", "branch", "guest"]) {
    assert.equal(launchMode("isx", cmd), undefined, String(cmd));
  }
  const flags = launchFlags(AT_HOME, "rpc");
  const union = unionFlags(AT_HOME);
  // the same flags, but no allowed path under a denied one (an allowed sub-path wins in Deno)
  const denied = [`${HOME}/.config/isx`, `${HOME}/.local/state/isx`, `${HOME}/.ssh`];
  for (const [i, f] of flags.slice(0, -1).entries()) {
    if (!/^--allow-(read|write)=/.test(f)) {
      assert.equal(f, union[i]);
      continue;
    }
    const paths = f.slice(f.indexOf("=") + 1).split(",");
    const was = union[i]!.slice(f.indexOf("=") + 1).split(",");
    assert.deepEqual(
      paths,
      was.filter((p) => !denied.some((d) => p === d || p.startsWith(`${d}/`))),
    );
    assert.ok(paths.includes(HOME) || f.startsWith("--allow-write"), f);
  }
  assert.ok(union.join().includes(`${HOME}/.config/isx/credentials.yaml`), "the union has it");
  assert.ok(!flags.join().includes(`${HOME}/.config/isx/credentials.yaml`));
  assert.equal(
    flags.at(-1),
    `--deny-read=${HOME}/.config/isx,${HOME}/.local/state/isx,${HOME}/.ssh`,
  );
  assert.deepEqual(launchFlags(AT_HOME), unionFlags(AT_HOME));
  for (const mode of MODES.filter((m) => m !== "rpc")) {
    assert.equal(PERMISSIONS[mode](AT_HOME).denyRead, undefined, mode);
  }
});

Deno.test("contextFrom names the incus client config only with a remote; the default flags are unchanged", () => {
  const get = (vars: Record<string, string>) => (k: string) => vars[k];
  const fixed = {
    cwd: "/srv/project",
    uid: 1000,
    programDir: "/opt/isx",
    execPath: "/usr/bin/deno",
    socket: "/var/lib/incus/unix.socket",
  };
  const plain = contextFrom(get({ HOME }), fixed);
  assert.equal(plain.incusConf, undefined);
  assert.deepEqual(
    unionFlags(contextFrom(get({ HOME }), { ...fixed, remote: false })),
    unionFlags(plain),
  );
  assert.ok(!unionFlags(plain).join(" ").includes("/.config/incus"));
  const remote = contextFrom(get({ HOME }), { ...fixed, remote: true });
  assert.equal(remote.incusConf, `${HOME}/.config/incus`);
  assert.ok(unionGrants(remote).read.includes(`${HOME}/.config/incus`));
  const conf = contextFrom(get({ HOME, INCUS_CONF: "/etc/ic/" }), { ...fixed, remote: true });
  assert.equal(conf.incusConf, "/etc/ic");
  // read before the mode is entered; no mode keeps it (enterMode revokes it)
  for (const m of MODES) {
    const g = PERMISSIONS[m](remote);
    assert.ok(!g.read.includes(`${HOME}/.config/incus`), m);
  }
});

Deno.test("the modes that wait for a guest's address may read its bridge's lease file, only them", () => {
  const c = { ...AT_HOME, socket: "/var/lib/incus/unix.socket" };
  const dir = "/var/lib/incus/networks";
  for (const m of MODES) {
    const kept = PERMISSIONS[m](c).read.includes(dir);
    // mcp/host/leases.ts: without the grant the wait quietly polls the state as before
    assert.equal(kept, ["instances", "mcp", "pool", "build"].includes(m), m);
    assert.ok(!PERMISSIONS[m](c).write.includes(dir), m);
  }
});
