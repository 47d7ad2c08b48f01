/**
 * The pre-built program (scripts/prebuild.ts, bin/launcher.bash, rpc/prebuilt.ts), in a copy
 * of this checkout so the user's own `.prebuilt/` is never touched: the launcher runs it only
 * while no source is newer, it answers as the sources do (the schema byte for byte, a module
 * it imports after entering its mode, the guest runners read from the checkout), a stale one
 * is rebuilt in the background, and a version a running process was started from is kept.
 *
 * @module
 */

import assert from "node:assert/strict";
import { entryPoints } from "../scripts/prebuild.ts";
import { COMMANDS, LAZY_MODULES } from "../cli/commands.ts";
import { moduleUrl, PREBUILT_KEY, programRoot } from "../rpc/prebuilt.ts";
import { readGuestScript } from "../guest/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DENO = Deno.execPath();

/** A copy of the checkout's files (tracked and new, not ignored) in a temporary directory. */
async function copyCheckout(): Promise<string> {
  const out = await new Deno.Command("git", {
    args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd: ROOT,
    stdout: "piped",
  }).output();
  const dir = await Deno.makeTempDir({ prefix: "isx-prebuilt-test-" });
  for (const f of new TextDecoder().decode(out.stdout).split("\0").filter(Boolean)) {
    const from = `${ROOT}/${f}`;
    const st = await Deno.lstat(from).catch(() => undefined);
    if (!st?.isFile) continue; // deleted in the work tree, or a link
    await Deno.mkdir(`${dir}/${f}`.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.copyFile(from, `${dir}/${f}`);
  }
  return dir;
}

function env(home: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CACHE_HOME: `${home}/cache`,
    XDG_CONFIG_HOME: `${home}/config`,
    XDG_STATE_HOME: `${home}/state`,
    DENO_DIR: Deno.env.get("DENO_DIR") ||
      `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`,
    ISX_DENO: DENO,
    ...extra,
  };
}

async function prebuild(root: string): Promise<void> {
  const o = await new Deno.Command(DENO, {
    args: ["run", "-A", "--quiet", "--config", `${root}/deno.json`, `${root}/scripts/prebuild.ts`],
    cwd: root,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(o.success, new TextDecoder().decode(o.stderr));
}

async function entry(root: string, home: string, extra: Record<string, string> = {}) {
  const o = await new Deno.Command(`${root}/bin/isb`, {
    args: ["rpc"],
    cwd: root,
    clearEnv: true,
    env: env(home, { ...extra, ISX_LAUNCH_PRINT: "entry" }),
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(o.stdout).trim();
}

/** `isb rpc` with these request lines; the reply lines (the hello first). */
async function rpc(root: string, home: string, lines: string[], extra = {}): Promise<string[]> {
  const child = new Deno.Command(`${root}/bin/isb`, {
    args: ["rpc"],
    cwd: root,
    clearEnv: true,
    env: env(home, extra),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(lines.map((l) => l + "\n").join("")));
  await w.close();
  const out = await child.output();
  return new TextDecoder().decode(out.stdout).split("\n").filter(Boolean);
}

const current = async (root: string) =>
  (await Deno.readTextFile(`${root}/.prebuilt/current`)).trim();

Deno.test("the bundle's entries are every module the program imports by a computed specifier", () => {
  const entries = entryPoints();
  for (const c of COMMANDS) assert.ok(entries.includes(`cli/${c.module}`), c.module);
  for (const m of LAZY_MODULES) {
    assert.ok(entries.includes(new URL(`cli/${m}`, "file:///").pathname.slice(1)), m);
  }
  assert.ok(entries.includes("rpc/server/methods/mod.ts"));
  assert.ok(entries.includes("cli/prebuilt_main.ts"));
});

Deno.test("pre-built, module URLs and the guest runners come from the checkout, not the chunk", async () => {
  const g = globalThis as Record<symbol, unknown>;
  const src = "file:///src/rpc/server/methods/mod.ts";
  assert.equal(moduleUrl("rpc/server/methods/mod.ts", src), src); // from the sources: as given
  assert.equal(programRoot("file:///src/"), "/src");
  const script = await readGuestScript("task_runner.ts");
  const fake = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${fake}/guest`);
    await Deno.writeTextFile(`${fake}/guest/task_runner.ts`, "// the checkout's copy\n");
    g[PREBUILT_KEY] = { root: `file://${fake}/`, out: `file://${fake}/.prebuilt/v1-1/` };
    assert.equal(
      moduleUrl("rpc/server/methods/mod.ts", src),
      `file://${fake}/.prebuilt/v1-1/rpc/server/methods/mod.js`,
    );
    assert.equal(programRoot("file:///src/"), fake);
    assert.equal(await readGuestScript("task_runner.ts"), "// the checkout's copy\n");
  } finally {
    delete g[PREBUILT_KEY];
    await Deno.remove(fake, { recursive: true });
  }
  assert.equal(await readGuestScript("task_runner.ts"), script);
});

Deno.test({
  name: "the launcher runs the pre-built program while it is fresh; it answers as the sources do",
  async fn() {
    const root = await copyCheckout();
    const home = await Deno.makeTempDir({ prefix: "isx-prebuilt-home-" });
    try {
      // none yet: the sources (ISX_PREBUILT=0: and no background build from this start)
      assert.equal(await entry(root, home, { ISX_PREBUILT: "0" }), `${root}/main.ts`);
      await prebuild(root);
      const v1 = await current(root);
      assert.match(v1, /^v\d+-\d+$/);
      assert.equal(await entry(root, home), `${root}/.prebuilt/${v1}/cli/prebuilt_main.js`);
      if (Deno.uid() === 0) {
        // a version file that is not this user's is never run (someone else's code)
        await Deno.chown(`${root}/.prebuilt/current`, 65534, 65534);
        assert.equal(await entry(root, home), `${root}/main.ts`);
        await Deno.chown(`${root}/.prebuilt/current`, 0, 0);
        await Deno.chown(`${root}/.prebuilt/${v1}/inputs`, 65534, 65534);
        assert.equal(await entry(root, home), `${root}/main.ts`);
        await Deno.chown(`${root}/.prebuilt/${v1}/inputs`, 0, 0);
        assert.equal(await entry(root, home), `${root}/.prebuilt/${v1}/cli/prebuilt_main.js`);
      }

      // the same answers: the schema byte for byte, an error, and a module imported after the
      // mode is entered (compose's operations, a chunk of their own) under rpc's grants
      await Deno.writeTextFile(
        `${root}/compose.yaml`,
        "services:\n  web:\n    image: debian-base\n",
      );
      const asks = [
        '{"id":1,"method":"schema"}',
        '{"id":2,"method":"no.such"}',
        '{"id":3,"method":"compose.load","params":{"files":["compose.yaml"]}}',
      ];
      const pre = await rpc(root, home, asks);
      const src = await rpc(root, home, asks, { ISX_PREBUILT: "0" });
      assert.equal(pre.length, 4, pre.join("\n"));
      assert.deepEqual(pre, src);
      assert.ok(pre[3]!.startsWith('{"id":3,"result":'), pre[3]);

      // a source newer than the build: the sources run, and a build starts in the background
      const later = new Date(Date.now() + 5_000);
      await Deno.utime(`${root}/rpc/errors.ts`, later, later);
      assert.equal(await entry(root, home), `${root}/main.ts`);
      const holder = await rpc(root, home, ['{"id":1,"method":"version"}']); // starts the build
      assert.equal(holder.length, 2);
      let v2 = v1;
      for (let i = 0; i < 300 && v2 === v1; i++) {
        await new Promise((r) => setTimeout(r, 100));
        v2 = await current(root).catch(() => v1);
      }
      assert.notEqual(v2, v1, "no background build made a new version");
      // the new one counts only from after the edit (5 s ahead): until then it stays stale
      await Deno.utime(`${root}/rpc/errors.ts`, new Date(), new Date());
      for (
        let i = 0;
        i < 100 && await Deno.stat(`${root}/.prebuilt/.lock`).then(() => true, () => false);
        i++
      ) {
        await new Promise((r) => setTimeout(r, 100));
      }
      await prebuild(root); // after the edit: fresh again
      const v3 = await current(root);
      assert.equal(await entry(root, home), `${root}/.prebuilt/${v3}/cli/prebuilt_main.js`);
      // how the bundle is made is an input too: an edit of scripts/prebuild.ts makes it stale
      const recipe = new Date(Date.now() + 5_000);
      await Deno.utime(`${root}/scripts/prebuild.ts`, recipe, recipe);
      assert.equal(await entry(root, home), `${root}/main.ts`);
    } finally {
      await Deno.remove(root, { recursive: true });
      await Deno.remove(home, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "a rebuild keeps the version a running process was started from and the one before, and removes the rest",
  async fn() {
    const root = await copyCheckout();
    const home = await Deno.makeTempDir({ prefix: "isx-prebuilt-home-" });
    try {
      await prebuild(root);
      const v1 = await current(root);
      const child = new Deno.Command(`${root}/bin/isb`, {
        args: ["rpc"],
        cwd: root,
        clearEnv: true,
        env: env(home),
        stdin: "piped",
        stdout: "piped",
        stderr: "null",
      }).spawn();
      const reader = child.stdout.getReader();
      await reader.read(); // the hello: it runs, from v1
      await prebuild(root);
      const v2 = await current(root);
      assert.notEqual(v2, v1);
      assert.ok(await Deno.stat(`${root}/.prebuilt/${v1}`).then(() => true, () => false));
      // it can still load what it loads after its hello (the library and the method table)
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode('{"id":1,"method":"schema"}\n'));
      const got = await reader.read();
      assert.match(new TextDecoder().decode(got.value), /^\{"id":1,"result":/);
      await w.close();
      reader.releaseLock();
      await child.stdout.cancel();
      await child.status;
      await prebuild(root);
      const v3 = await current(root);
      // v1 is gone now its process is; v2 stays one build more (a launcher may have just read
      // its name), v3 is current
      const left = [...Deno.readDirSync(`${root}/.prebuilt`)].map((e) => e.name).sort();
      assert.deepEqual(left, ["current", v2, v3].sort());
    } finally {
      await Deno.remove(root, { recursive: true });
      await Deno.remove(home, { recursive: true });
    }
  },
});
