import assert from "node:assert/strict";
import { FOREGROUND_SH, foregroundArgv } from "./_foreground_shell.ts";

/** Runs FOREGROUND_SH then `tail` with HOME=home in a new session of the host's bash. */
async function login(home: string, name: string, tail: string) {
  const out = await new Deno.Command("setsid", {
    args: ["-w", "bash", "-c", FOREGROUND_SH + tail, "isx", name],
    env: { HOME: home, PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout), err: dec.decode(out.stderr) };
}

Deno.test("FOREGROUND_SH records the session id and leaves the command a clean shell", async () => {
  const home = await Deno.makeTempDir();
  try {
    const r = await login(home, "exec-1-1", 'echo "$$"; echo "[$(compgen -v _isx_)]"; exit 7');
    assert.equal(r.code, 7, r.err);
    const [pid, vars] = r.out.trim().split("\n");
    assert.equal(await Deno.readTextFile(`${home}/.isx-mcp/run/exec-1-1.pid`), `${pid}\n`);
    assert.equal(vars, "[]"); // its variables are gone before the command's lines
    assert.equal((await Deno.stat(`${home}/.isx-mcp/run`)).mode! & 0o777, 0o700);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("FOREGROUND_SH never writes through a planted link or file", async () => {
  const home = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${home}/.isx-mcp/run`, { recursive: true });
    await Deno.writeTextFile(`${home}/target`, "keep\n");
    await Deno.symlink(`${home}/target`, `${home}/.isx-mcp/run/exec-1-2.pid`);
    const r = await login(home, "exec-1-2", 'echo "$$"');
    assert.equal(r.code, 0, r.err);
    assert.equal(await Deno.readTextFile(`${home}/target`), "keep\n");
    const st = await Deno.lstat(`${home}/.isx-mcp/run/exec-1-2.pid`);
    assert.equal(st.isFile, true);
    assert.equal(await Deno.readTextFile(`${home}/.isx-mcp/run/exec-1-2.pid`), r.out);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("FOREGROUND_SH sweeps the pid files of ended sessions past 64, keeps live ones", async () => {
  const home = await Deno.makeTempDir();
  const run = `${home}/.isx-mcp/run`;
  try {
    await Deno.mkdir(run, { recursive: true });
    for (let i = 0; i < 70; i++) await Deno.writeTextFile(`${run}/exec-9-${i}.pid`, "999999999\n");
    await Deno.writeTextFile(`${run}/exec-9-junk.pid`, "$(touch x)\n");
    await Deno.writeTextFile(`${run}/exec-9-live.pid`, `${Deno.pid}\n`);
    const few = await login(home, "exec-2-1", "true");
    assert.equal(few.code, 0, few.err);
    const left = [];
    for await (const e of Deno.readDir(run)) left.push(e.name);
    assert.deepEqual(left.sort(), ["exec-2-1.pid", "exec-9-live.pid"]);
    // at 64 or fewer nothing is swept: the common path forks nothing
    for (let i = 0; i < 60; i++) await Deno.writeTextFile(`${run}/exec-8-${i}.pid`, "999999999\n");
    await login(home, "exec-2-2", "true");
    let n = 0;
    for await (const _ of Deno.readDir(run)) n++;
    assert.equal(n, 63);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("foregroundArgv: setsid, setpriv to the user, timeout only when set, the name last", () => {
  const a = foregroundArgv("agentuser", "exec-1-3", "", "exec bash -c 'true'\n");
  assert.deepEqual(a.slice(0, 7), [
    "setsid",
    "-w",
    "setpriv",
    "--reuid=agentuser",
    "--regid=agentuser",
    "--init-groups",
    "--reset-env",
  ]);
  assert.deepEqual(a.slice(7, 10), ["bash", "-l", "-c"]);
  assert.equal(a[10], FOREGROUND_SH + "exec bash -c 'true'\n");
  assert.deepEqual(a.slice(11), ["isx", "exec-1-3"]);
  const t = foregroundArgv("agentuser", "exec-1-4", "2.5", "true\n");
  assert.deepEqual(t.slice(7, 11), ["timeout", "-k", "10s", "2.5s"]);
});
