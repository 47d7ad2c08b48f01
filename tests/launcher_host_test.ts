/**
 * The launchers as a user's machine has them (issue 19): started through a link in another
 * directory (as `scripts/demo.sh` puts them in /usr/local/bin) with no deno on PATH, they find
 * their checkout and the Deno install-deno.sh put in the user's cache; one that cannot start
 * says why in one line on stderr; and a start makes no DNS lookup (Deno's release check is
 * off), seen under strace.
 *
 * @module
 */

import assert from "node:assert/strict";
import { VERSION } from "../rpc/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DENO = Deno.execPath();
const DENO_DIR = Deno.env.get("DENO_DIR") ||
  `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`;
const dec = new TextDecoder();

/** A temp dir with `bin/isx` and `bin/isb` links to the launchers, and a HOME. */
async function machine(fn: (dir: string) => Promise<void>) {
  const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "isx-launch-host-" }));
  try {
    await Deno.mkdir(`${dir}/bin`);
    await Deno.mkdir(`${dir}/home`);
    for (const p of ["isx", "isb"]) await Deno.symlink(`${ROOT}/bin/${p}`, `${dir}/bin/${p}`);
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function run(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  opts: { stdinMs?: number } = {},
) {
  const child = new Deno.Command(cmd, {
    args,
    env,
    clearEnv: true,
    cwd: env.HOME ?? "/",
    stdin: opts.stdinMs ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdinMs) {
    // keep stdin open a while (a long-running start: `isx mcp` waiting for its client)
    await new Promise((r) => setTimeout(r, opts.stdinMs));
    await child.stdin.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("a launcher linked from another directory runs with no deno on PATH (the npm install's deno)", async () => {
  await machine(async (dir) => {
    // where scripts/install-deno.sh puts deno: the launcher's own fallback
    const npmDeno = `${dir}/cache/deno-npm/2.9.6/node_modules/@deno/linux-x64-glibc`;
    await Deno.mkdir(npmDeno, { recursive: true });
    await Deno.symlink(DENO, `${npmDeno}/deno`);
    const env = {
      PATH: `${dir}/bin:/usr/bin:/bin`,
      HOME: `${dir}/home`,
      XDG_CACHE_HOME: `${dir}/cache`,
      DENO_DIR,
    };
    const which = await run("bash", ["-c", "command -v deno || echo none"], env);
    assert.equal(which.stdout.trim(), "none", "no deno on this PATH");
    for (const p of ["isx", "isb"]) {
      const r = await run("bash", ["-c", `${p} --version`], env);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), `${p} ${VERSION}`);
    }
    const flags = await run("bash", ["-c", "ISX_LAUNCH_PRINT=1 isx mcp"], env);
    assert.equal(flags.code, 0, flags.stderr);
    assert.ok(flags.stdout.includes(`${ROOT}/proxy`), "the link resolves to the checkout");
  });
});

Deno.test("a launcher that cannot start says why in one line", async () => {
  await machine(async (dir) => {
    const base = { PATH: "/usr/bin:/bin", HOME: `${dir}/home`, XDG_CACHE_HOME: `${dir}/cache` };
    const none = await run(`${dir}/bin/isx`, ["--version"], base);
    assert.equal(none.code, 1);
    assert.equal(none.stdout, "");
    assert.match(none.stderr, /^isx: deno not found \(set ISX_DENO, put deno on PATH, or install/);
    assert.equal(none.stderr.trimEnd().split("\n").length, 1, none.stderr);
    // a deno that fails as a broken install does: several lines of error, a non-zero exit
    const broken = `${dir}/deno`;
    await Deno.writeTextFile(
      broken,
      "#!/bin/sh\necho 'error: Specifier not found in cache: \"npm:zod\", --cached-only is specified.' >&2\n" +
        "echo '    at file:///x/main.ts:1:1' >&2\necho 'hint: run deno install' >&2\nexit 1\n",
    );
    await Deno.chmod(broken, 0o755);
    for (const p of ["isx", "isb"]) {
      const r = await run(`${dir}/bin/${p}`, ["--version"], { ...base, ISX_DENO: broken });
      assert.equal(r.code, 1);
      assert.equal(r.stderr.trimEnd().split("\n").length, 1, r.stderr);
      assert.match(
        r.stderr.trimEnd(),
        new RegExp(
          `^${p}: cannot start: computing the permission flags failed: error: Specifier not found ` +
            "in cache.*\\(run bash scripts/install-deno.sh to cache the dependencies\\)$",
        ),
      );
    }
  });
});

const STRACE = await new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" })
  .output().then((o) => o.success, () => false);

Deno.test({
  name: "a launcher start makes no DNS lookup and no network connection (strace)",
  // scripts/host-setup.sh installs strace; without it this test cannot look
  ignore: !STRACE,
  async fn() {
    await machine(async (dir) => {
      const env = {
        PATH: `${dir}/bin:/usr/bin:/bin`,
        HOME: `${dir}/home`,
        XDG_CACHE_HOME: `${dir}/cache`,
        ISX_DENO: DENO,
        DENO_DIR,
        // an incusd nobody answers on: the start itself is what is watched
        INCUS_SOCKET: `${dir}/no-incus.socket`,
      };
      const trace = `${dir}/trace`;
      // isx mcp waits for its client (Deno's release check would fire in the background);
      // the first run also computes and caches the flags (cli/flags.ts, a second deno)
      for (const args of [["isx", "mcp"], ["isx", "mcp"], ["isb", "--version"]]) {
        const r = await run(
          "strace",
          [
            "-f",
            "-qq",
            "-e",
            "trace=connect,sendto,sendmsg",
            "-o",
            trace,
            `${dir}/bin/${args[0]}`,
            ...args.slice(1),
          ],
          env,
          { stdinMs: args[1] === "mcp" ? 3000 : 0 },
        );
        assert.equal(r.code, 0, r.stderr);
        const calls = (await Deno.readTextFile(trace)).split("\n").filter((l) =>
          /\b(connect|sendto|sendmsg)\(/.test(l)
        );
        const net = calls.filter((l) => /AF_INET6?|htons\(53\)/.test(l));
        assert.deepEqual(net, [], `${args.join(" ")} reached out:\n${net.join("\n")}`);
      }
    });
  },
});
