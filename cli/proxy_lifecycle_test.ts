import { deepEqual, equal, ok } from "node:assert/strict";
import { splitGlobal } from "./args.ts";
import type { CliContext } from "./command.ts";
import { contextFrom } from "./perm_context.ts";
import { launch, PROXY_V8_FLAGS } from "./proxy_lifecycle.ts";

function ctx(execPath: string): CliContext {
  const env: Record<string, string> = { HOME: "/home/u" };
  const perm = contextFrom((k) => env[k], {
    cwd: "/w",
    uid: 1000,
    programDir: "/opt/isx",
    execPath,
  });
  return {
    prog: "isx",
    global: {
      socket: "/var/lib/incus/unix.socket",
      project: undefined,
      remote: undefined,
      target: undefined,
      createTimeout: undefined,
      quiet: false,
      help: false,
      version: false,
    },
    perm,
    env: {},
  };
}

Deno.test("the background proxy starts under deno with the proxy's V8 flags, before main.ts", () => {
  const l = launch(ctx("/usr/bin/deno"));
  for (const argv of [l.run, l.start]) {
    const flag = argv.indexOf(`--v8-flags=${PROXY_V8_FLAGS}`);
    ok(flag > 0, argv.join(" "));
    ok(flag < argv.indexOf("/opt/isx/main.ts"), "a V8 flag after main.ts is a program argument");
    equal(argv[1], "run");
  }
  deepEqual(l.run.slice(-4, -1), ["proxy", "run", "--log-file"]);
  ok(/^--max-semi-space-size=\d+$/.test(PROXY_V8_FLAGS));
});

Deno.test("the compiled binary gets no deno run arguments (its V8 flags are its own)", () => {
  const l = launch(ctx("/usr/local/bin/isx"));
  equal(l.run[0], "/usr/local/bin/isx");
  ok(!l.run.some((a) => a.startsWith("--v8-flags")), l.run.join(" "));
});

function remoteCtx(argv: string[], vars: Record<string, string> = {}): CliContext {
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
  const l = launch(remoteCtx(["--remote", "lab", "--target", "m2", "proxy", "install"], {
    INCUS_CONF: "/etc/incus-client",
  }));
  const at = l.run.indexOf("--remote");
  deepEqual(l.run.slice(at, at + 4), ["--remote", "lab", "--target", "m2"]);
  ok(l.run.some((a) => a.startsWith("--allow-read=") && a.includes("/etc/incus-client")));
  equal(l.env.INCUS_CONF, "/etc/incus-client");
});

Deno.test("launch: without a remote, neither flag nor the incus client config appears", () => {
  const l = launch(remoteCtx(["proxy", "install"]));
  ok(!l.run.includes("--remote") && !l.run.includes("--target"));
  ok(!l.run.join(" ").includes(".config/incus"));
  equal(l.env.INCUS_CONF, undefined);
});
