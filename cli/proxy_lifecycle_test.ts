import assert from "node:assert/strict";
import { splitGlobal } from "./args.ts";
import type { CliContext } from "./command.ts";
import { contextFrom } from "./permissions.ts";
import { launch } from "./proxy_lifecycle.ts";

function ctx(argv: string[], vars: Record<string, string> = {}): CliContext {
  const get = (k: string) => ({ HOME: "/home/u", ...vars } as Record<string, string>)[k];
  const { global } = splitGlobal(argv, get);
  const perm = contextFrom(get, {
    cwd: "/home/u",
    uid: 1000,
    programDir: "/opt/isx",
    execPath: "/usr/bin/deno",
    socket: global.socket,
    remote: global.remote !== undefined,
  });
  return { prog: "isx", global, perm, env: {} };
}

Deno.test("launch: an installed proxy keeps --remote, --target and the incus client config it was installed with", () => {
  const l = launch(ctx(["--remote", "lab", "--target", "m2", "proxy", "install"], {
    INCUS_CONF: "/etc/incus-client",
  }));
  const at = l.run.indexOf("--remote");
  assert.deepEqual(l.run.slice(at, at + 4), ["--remote", "lab", "--target", "m2"]);
  assert.ok(l.run.some((a) => a.startsWith("--allow-read=") && a.includes("/etc/incus-client")));
  assert.equal(l.env.INCUS_CONF, "/etc/incus-client");
});

Deno.test("launch: without a remote, neither flag nor the incus client config appears", () => {
  const l = launch(ctx(["proxy", "install"]));
  assert.ok(!l.run.includes("--remote") && !l.run.includes("--target"));
  assert.ok(!l.run.join(" ").includes(".config/incus"));
  assert.equal(l.env.INCUS_CONF, undefined);
});
