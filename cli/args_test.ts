import assert from "node:assert/strict";
import { splitGlobal, UsageError } from "./args.ts";

const env = (vars: Record<string, string>) => (k: string) => vars[k];

Deno.test("splitGlobal takes global flags before or after the subcommand", () => {
  const a = splitGlobal(["--socket", "/s", "rpc", "--project", "p"], env({}));
  assert.equal(a.command, "rpc");
  assert.equal(a.global.socket, "/s");
  assert.equal(a.global.project, "p");
  const b = splitGlobal(["rpc", "--socket=/t", "--create-timeout", "90000ms"], env({}));
  assert.equal(b.global.socket, "/t");
  assert.equal(b.global.createTimeout, "90000ms");
});

Deno.test("splitGlobal falls back to INCUS_SOCKET, then INCUS_DIR, then the default", () => {
  assert.equal(splitGlobal(["rpc"], env({ INCUS_SOCKET: "/a" })).global.socket, "/a");
  assert.equal(splitGlobal(["rpc"], env({ INCUS_DIR: "/d" })).global.socket, "/d/unix.socket");
  assert.equal(
    splitGlobal(["rpc"], env({ INCUS_SOCKET: "", INCUS_DIR: "" })).global.socket,
    "/var/lib/incus/unix.socket",
  );
});

Deno.test("splitGlobal maps --org to project isb-ORG and --project wins over it", () => {
  assert.equal(splitGlobal(["rpc", "--org", "acme"], env({})).global.project, "isb-acme");
  assert.equal(splitGlobal(["rpc"], env({ ISB_ORG: "acme" })).global.project, "isb-acme");
  assert.equal(
    splitGlobal(["rpc", "--org", "acme", "--project", "x"], env({})).global.project,
    "x",
  );
  assert.equal(splitGlobal(["rpc", "--project", "default"], env({})).global.project, undefined);
  assert.equal(splitGlobal(["rpc"], env({ INCUS_PROJECT: "q" })).global.project, "q");
});

Deno.test("splitGlobal accepts the unused isb flags and leaves the rest to the command", () => {
  const r = splitGlobal(["-q", "-f", "isb.yaml", "rpc", "--env-file", ".env", "-P", "x"], env({}));
  assert.equal(r.command, "rpc");
  assert.deepEqual(r.rest, []);
  const s = splitGlobal(["branch", "web", "--from", "tpl"], env({}));
  assert.deepEqual(s.rest, ["web", "--from", "tpl"]);
});

Deno.test("splitGlobal refuses a value flag without its value", () => {
  assert.throws(() => splitGlobal(["rpc", "--socket"], env({})), UsageError);
});

Deno.test("splitGlobal reads --remote (else INCUS_REMOTE) and --target anywhere; neither by default", () => {
  const none = splitGlobal(["list"], env({}));
  assert.equal(none.global.remote, undefined);
  assert.equal(none.global.target, undefined);
  const a = splitGlobal(["list", "--remote", "lab", "--target=m2"], env({ INCUS_REMOTE: "x" }));
  assert.equal(a.global.remote, "lab");
  assert.equal(a.global.target, "m2");
  assert.deepEqual(a.rest, []);
  assert.equal(splitGlobal(["rpc"], env({ INCUS_REMOTE: "x" })).global.remote, "x");
  assert.equal(splitGlobal(["rpc"], env({ INCUS_REMOTE: "" })).global.remote, undefined);
});
