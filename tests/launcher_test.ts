/**
 * The launchers (`bin/isb`, `bin/isx`, through `bin/launcher.bash`) start Deno once with
 * exactly the table's flags: computed by cli/flags.ts on a miss, read from the per-user
 * cache on a hit, recomputed when a source of the table is newer than the cache. Spawns the
 * real launchers with `ISX_LAUNCH_PRINT=1` (print the flags instead of starting main.ts).
 */
import assert from "node:assert/strict";
import { contextFrom } from "../cli/perm_context.ts";
import { launchFlags, launchMode } from "../cli/launch.ts";
import { splitGlobal } from "../cli/args.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DENO = Deno.execPath();
const SCRIPT = await Deno.readTextFile(`${ROOT}/bin/launcher.bash`);

function bashArray(name: string): string[] {
  const m = SCRIPT.match(new RegExp(`^${name}=\\(([^)]*)\\)`, "m"));
  if (!m) throw new Error(`bin/launcher.bash: no ${name}=(…)`);
  return m[1]!.split(/\s+/).filter(Boolean);
}

async function withHome(fn: (dir: string, env: Record<string, string>) => Promise<void>) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "isx-launch-" }));
  const env = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: `${dir}/home`,
    XDG_CACHE_HOME: `${dir}/cache`,
    ISX_DENO: DENO,
  };
  await Deno.mkdir(`${dir}/home`);
  await Deno.mkdir(`${dir}/work`);
  try {
    await fn(dir, env);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function printed(prog: string, args: string[], env: Record<string, string>, cwd: string) {
  const out = await new Deno.Command(`${ROOT}/bin/${prog}`, {
    args,
    cwd,
    env: { ...env, ISX_LAUNCH_PRINT: "1" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `bin/${prog} ${args.join(" ")}: ${err}`);
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
}

function expected(prog: string, args: string[], env: Record<string, string>, cwd: string) {
  const get = (k: string) => env[k];
  const { global, command } = splitGlobal(args, get);
  const ctx = contextFrom(get, {
    cwd,
    uid: Deno.uid() ?? 0,
    programDir: ROOT,
    execPath: DENO,
    socket: global.socket,
    remote: global.remote !== undefined,
  });
  return launchFlags(ctx, launchMode(prog, command));
}

const CASES: [string, string[]][] = [
  ["isb", ["rpc"]],
  ["isx", ["list"]],
  ["isx", ["rpc"]],
  ["isx", ["--project", "p", "rpc"]],
  ["isx", ["--socket", "/run/other/incus.socket", "list"]],
  ["isb", ["--socket=/run/other/incus.socket", "rpc"]],
  // a remote adds read of the incus client config (read before the mode is entered)
  ["isx", ["--remote", "lab", "list"]],
  ["isb", ["--remote=lab", "rpc"]],
];

Deno.test("the launchers' flags equal the table's, on a miss and on the cached hit", async () => {
  await withHome(async (dir, env) => {
    for (const [prog, args] of CASES) {
      const want = expected(prog, args, env, `${dir}/work`);
      const flags = (o: string[]) => o.filter((l) => !l.startsWith("#"));
      assert.deepEqual(
        flags(await printed(prog, args, env, `${dir}/work`)),
        want,
        `${prog} ${args}`,
      );
      assert.deepEqual(
        flags(await printed(prog, args, env, `${dir}/work`)),
        want,
        `${prog} ${args}`,
      );
    }
    // a remote (flag or INCUS_REMOTE) changes the flags, so it is part of the key
    const cwd = `${dir}/work`;
    const remote = expected("isx", ["--remote", "lab", "list"], env, cwd);
    assert.notDeepEqual(remote, expected("isx", ["list"], env, cwd));
    assert.ok(remote.some((f) => f.startsWith("--allow-read=") && f.includes("/.config/incus")));
    const env3 = { ...env, INCUS_REMOTE: "lab" };
    assert.deepEqual(
      (await printed("isx", ["list"], env3, cwd)).filter((l) => !l.startsWith("#")),
      remote,
    );
    // a changed variable the table reads is a new key, not a stale hit
    const env2 = { ...env, XDG_STATE_HOME: `${dir}/state` };
    assert.deepEqual(
      await printed("isb", ["rpc"], env2, `${dir}/work`),
      expected("isb", ["rpc"], env2, `${dir}/work`),
    );
  });
});

Deno.test("a cache hit starts no second Deno; a table source newer than the cache refills it", async () => {
  await withHome(async (dir, env) => {
    const cwd = `${dir}/work`;
    await printed("isb", ["rpc"], env, cwd);
    const files = [...Deno.readDirSync(`${dir}/cache/isx-launch`)].map((e) => e.name);
    assert.equal(files.length, 1);
    const file = `${dir}/cache/isx-launch/${files[0]}`;
    const [key] = (await Deno.readTextFile(file)).split("\n");
    // a marker only the cache can hold: printed, so the hit did not run cli/flags.ts
    await Deno.writeTextFile(file, `${key}\n--no-prompt\n--marker-from-cache\n`);
    assert.deepEqual(await printed("isb", ["rpc"], env, cwd), [
      "--no-prompt",
      "--marker-from-cache",
    ]);
    // the table changed after the cache was written: recomputed
    const old = new Date(Date.now() - 86_400_000);
    await Deno.utime(file, old, old);
    assert.deepEqual(await printed("isb", ["rpc"], env, cwd), expected("isb", ["rpc"], env, cwd));
    // a file whose first line is another key is never used
    await Deno.writeTextFile(file, `not the key\n--marker-from-cache\n`);
    assert.deepEqual(await printed("isb", ["rpc"], env, cwd), expected("isb", ["rpc"], env, cwd));
  });
});

Deno.test("two checkouts started from one directory each get their own program's flags", async () => {
  await withHome(async (dir, env) => {
    // a second checkout: what the launcher and cli/flags.ts read (ISX_LAUNCH_PRINT stops there)
    const other = `${dir}/other`;
    await Deno.mkdir(other);
    const copy = await new Deno.Command("cp", {
      args: ["-a", `${ROOT}/bin`, `${ROOT}/cli`, `${ROOT}/deno.json`, `${ROOT}/deno.lock`, other],
    }).output();
    assert.ok(copy.success, "copy the launcher and cli/ into a second checkout");
    const cwd = `${dir}/work`;
    const readOf = (flags: string[]) =>
      (flags.find((f) => f.startsWith("--allow-read=")) ?? "").slice("--allow-read=".length)
        .split(",");
    const run = async (root: string) => {
      const out = await new Deno.Command(`${root}/bin/isb`, {
        args: ["rpc"],
        cwd,
        env: { ...env, ISX_LAUNCH_PRINT: "1" },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
    };
    assert.ok(readOf(await run(ROOT)).includes(`${ROOT}/rpc`), "the first checkout's own");
    // the cache file of this directory now holds the first checkout's flags: not for the other
    const second = readOf(await run(other));
    assert.ok(second.includes(`${other}/rpc`), `the second checkout's own: ${second}`);
    assert.ok(!second.includes(`${ROOT}/rpc`), "nothing of the first checkout");
  });
});

Deno.test("LAUNCH_SOURCES lists exactly the local modules cli/flags.ts loads", async () => {
  const out = await new Deno.Command(DENO, {
    args: ["info", "--json", "cli/flags.ts"],
    cwd: ROOT,
    stdout: "piped",
  }).output();
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    modules: { specifier: string }[];
  };
  const base = `file://${ROOT}/`;
  const local = info.modules.map((m) => m.specifier).filter((s) => s.startsWith(base))
    .map((s) => s.slice(base.length));
  assert.deepEqual([...bashArray("LAUNCH_SOURCES")].sort(), local.sort());
});

Deno.test("LAUNCH_ENV names every variable cli/flags.ts reads", async () => {
  const names = bashArray("LAUNCH_ENV");
  const out = await new Deno.Command(DENO, {
    args: [
      "run",
      "--no-prompt",
      "--allow-read",
      `--allow-env=${names.join(",")}`,
      "--allow-sys=uid",
      "cli/flags.ts",
      "--socket",
      "/x",
      "rpc",
    ],
    cwd: ROOT,
    env: { ISX_PROG: "isx" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  // and the check can fail: without HOME in the list, flags.ts is refused
  const without = await new Deno.Command(DENO, {
    args: ["run", "--no-prompt", "--allow-read", "--allow-env=ISX_PROG", "cli/flags.ts"],
    cwd: ROOT,
    stdout: "null",
    stderr: "null",
  }).output();
  assert.equal(without.success, false);
});

const GIT = await new Deno.Command("git", {
  args: ["-C", ROOT, "rev-parse", "HEAD"],
  stdout: "piped",
  stderr: "null",
}).output().catch(() => undefined);

Deno.test({
  name: "bin/isx hands the checkout's commit to the program as git itself reads it",
  ignore: !GIT?.success, // not a git work tree: nothing to compare with
  fn: async () => {
    await withHome(async (dir, env) => {
      const lines = await printed("isx", ["list"], env, `${dir}/work`);
      const sha = new TextDecoder().decode(GIT!.stdout).trim();
      assert.ok(lines.includes(`# ISX_GIT_SHA=${sha}`), lines.join("\n"));
    });
  },
});

Deno.test("the incus client's default-remote is followed: the launcher grants its config and isx uses it; --socket keeps the socket", async () => {
  await withHome(async (dir, env) => {
    const cwd = `${dir}/work`;
    const conf = `${env.HOME}/.config/incus`;
    const grantsConf = (flags: string[]) =>
      flags.some((f) => f.startsWith("--allow-read=") && f.split(/[=,]/).includes(conf));
    assert.equal(grantsConf(await printed("isx", ["list"], env, cwd)), false);
    // `incus remote switch lab`, after the flags were cached: the cache is stale, not reused
    const cached = `${dir}/cache/isx-launch`;
    for (const e of Deno.readDirSync(cached)) {
      const old = new Date(Date.now() - 86_400_000);
      await Deno.utime(`${cached}/${e.name}`, old, old);
    }
    await Deno.mkdir(conf, { recursive: true });
    await Deno.writeTextFile(
      `${conf}/config.yml`,
      "default-remote: lab\nremotes:\n  lab:\n    addr: https://127.0.0.1:9\n    protocol: incus\n",
    );
    assert.equal(grantsConf(await printed("isx", ["list"], env, cwd)), true);
    const run = async (args: string[]) => {
      const out = await new Deno.Command(`${ROOT}/bin/isx`, {
        args,
        cwd,
        env: {
          ...env,
          DENO_DIR: Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`,
        },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      return { code: out.code, err: new TextDecoder().decode(out.stderr) };
    };
    // followed: lab has no client certificate yet (the socket would have listed instances)
    const followed = await run(["list"]);
    assert.equal(followed.code, 1, followed.err);
    assert.match(followed.err, /Incus remote "lab": no client certificate/);
    // a socket named is a choice of the local daemon: lab is not used
    const sock = await run(["--socket", "/nonexistent/isx/unix.socket", "list"]);
    assert.doesNotMatch(sock.err, /lab/);
    assert.match(sock.err, /\/nonexistent\/isx\/unix\.socket/);
  });
});

/** The `deno` argv bin/isx execs for `args`: a stand-in deno records it (flags.ts runs for real). */
async function execArgv(args: string[], env: Record<string, string>, dir: string) {
  const fake = `${dir}/fake-deno`;
  await Deno.writeTextFile(
    fake,
    `#!/usr/bin/env bash\nfor a in "$@"; do [[ "$a" == */cli/flags.ts ]] && exec "${DENO}" "$@"; done\n` +
      `printf '%s\\n' "$@"\n`,
    { mode: 0o755 },
  );
  const out = await new Deno.Command(`${ROOT}/bin/isx`, {
    args,
    cwd: `${dir}/work`,
    env: { ...env, ISX_DENO: fake },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l !== "");
}

Deno.test("bin/isx starts `isx proxy run` with the background proxy's V8 flags, `isx mcp` with its own, and nothing else with either", async () => {
  const { PROXY_V8_FLAGS } = await import("../cli/proxy_lifecycle.ts");
  assert.ok(SCRIPT.includes(`PROXY_V8_FLAGS="${PROXY_V8_FLAGS}"`), "the launcher's value differs");
  const CASES = [
    ["proxy", "run"],
    ["proxy", "run", "--log-file", "/tmp/x.log"],
    ["--socket", "/run/x.socket", "proxy", "run"],
    ["--project=p", "-q", "proxy", "run"],
    ["proxy", "--remote", "lab", "run"],
    ["proxy", "status"],
    ["proxy", "start"],
    ["list"],
    ["--socket", "proxy", "run"], // "proxy" is the socket here: the command is "run"
    ["run", "proxy"],
    ["mcp"],
    ["--project", "p", "mcp", "--no-preflight"],
    ["list", "mcp"],
  ];
  const mcpFlag = `--v8-flags=${SCRIPT.match(/^MCP_V8_FLAGS="([^"]+)"$/m)![1]}`;
  assert.match(mcpFlag, /^--v8-flags=--min-semi-space-size=\d+$/);
  await withHome(async (dir, env) => {
    for (const args of CASES) {
      const { command, rest } = splitGlobal(args, () => undefined);
      const want = command === "proxy" && rest.find((a) => !a.startsWith("-")) === "run";
      const flag = `--v8-flags=${PROXY_V8_FLAGS}`;
      const printedLines = await printed("isx", args, env, `${dir}/work`);
      assert.equal(printedLines.includes(`# ${flag}`), want, `printed: ${args.join(" ")}`);
      const argv = await execArgv(args, env, dir);
      const main = argv.indexOf(`${ROOT}/main.ts`);
      assert.ok(main > 0, argv.join(" "));
      assert.equal(argv.slice(0, main).includes(flag), want, `exec: ${args.join(" ")}`);
      const wantMcp = command === "mcp";
      assert.equal(printedLines.includes(`# ${mcpFlag}`), wantMcp, `printed: ${args.join(" ")}`);
      assert.equal(argv.slice(0, main).includes(mcpFlag), wantMcp, `exec: ${args.join(" ")}`);
      assert.deepEqual(argv.slice(main + 1), args); // the program's own arguments, untouched
    }
    // isb never runs the proxy
    assert.ok(!(await printed("isb", ["rpc"], env, `${dir}/work`)).some((l) => l.includes("v8")));
  });
});
