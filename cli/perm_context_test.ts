import assert from "node:assert/strict";
import { defaultRemoteOf, followedDefaultRemote, readIfPermitted } from "./perm_context.ts";

Deno.test("defaultRemoteOf: the name incus remote switch wrote; local, empty and missing are none", () => {
  const yml = (d: string) =>
    `${d}remotes:\n  lab:\n    addr: https://10.0.0.5:8443\n    protocol: incus\n`;
  assert.equal(defaultRemoteOf(yml("default-remote: lab\n")), "lab");
  assert.equal(defaultRemoteOf(yml('default-remote: "lab"  # switched\n')), "lab");
  assert.equal(defaultRemoteOf(yml("default-remote: 'lab'\n")), "lab");
  assert.equal(defaultRemoteOf(yml("default-remote: local\n")), undefined);
  assert.equal(defaultRemoteOf(yml("default-remote:\n")), undefined);
  assert.equal(defaultRemoteOf(yml("")), undefined);
  // nested keys are not the top-level one
  assert.equal(defaultRemoteOf("remotes:\n  x:\n    default-remote: lab\n"), undefined);
});

Deno.test("followedDefaultRemote: followed only when nothing names a remote or a socket and config.yml is readable", () => {
  const files: Record<string, string> = {
    "/home/u/.config/incus/config.yml": "default-remote: lab\n",
    "/etc/ic/config.yml": "default-remote: local\n",
  };
  const read = (p: string) => files[p];
  const env = (vars: Record<string, string>) => (k: string) =>
    ({ HOME: "/home/u", ...vars } as Record<string, string>)[k];
  const follow = (vars: Record<string, string>, socketFlag = false) =>
    followedDefaultRemote(env(vars), { socketFlag, read });
  assert.equal(follow({}), "lab");
  assert.equal(follow({ INCUS_REMOTE: "" }), "lab", "an empty variable is unset");
  assert.equal(follow({}, true), undefined, "--socket chooses the local daemon");
  assert.equal(follow({ INCUS_SOCKET: "/run/x.sock" }), undefined);
  assert.equal(follow({ INCUS_DIR: "/var/lib/incus" }), undefined);
  assert.equal(follow({ INCUS_REMOTE: "other" }), undefined, "a named remote is used as named");
  assert.equal(follow({ INCUS_CONF: "/etc/ic" }), undefined, "default-remote: local");
  assert.equal(follow({ INCUS_CONF: "/nowhere" }), undefined, "no config.yml");
});

Deno.test({
  name: "readIfPermitted: a file outside the read grant is none, not an error",
  permissions: { read: false },
  fn() {
    assert.equal(readIfPermitted("/etc/hostname"), undefined);
  },
});
