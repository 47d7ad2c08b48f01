import assert from "node:assert/strict";
import { FOREGROUND_LINE, FOREGROUND_SH, foregroundArgv } from "./_foreground_shell.ts";

/**
 * Runs the login shell's line as foregroundArgv has it (FOREGROUND_SH + `setup`, then
 * `command`) with HOME=home in a new session of the host's bash; `stdin` is what the host
 * sends (the gate, then the command's stdin); absent: the directory "" (home).
 */
async function login(
  home: string,
  name: string,
  command: string,
  o: { stdin?: string; setup?: string } = {},
) {
  const p = new Deno.Command("setsid", {
    args: [
      "-w",
      "bash",
      "-c",
      FOREGROUND_LINE,
      "bash",
      name,
      FOREGROUND_SH + (o.setup ?? ""),
      command,
    ],
    env: { HOME: home, PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(o.stdin ?? "\0")).catch(() => {});
  await w.close().catch(() => {});
  const out = await p.output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout), err: dec.decode(out.stderr) };
}

Deno.test("FOREGROUND_SH: end of input before the gate writes and runs nothing", async () => {
  const home = await Deno.makeTempDir();
  try {
    for (const stdin of ["", "/tmp"]) { // nothing, or a directory without its NUL
      const r = await login(home, "exec-1-0", `touch ${home}/ran`, { stdin });
      assert.equal(r.code, 125, r.err);
      assert.match(r.err, /no working directory came on stdin/);
      assert.deepEqual([...Deno.readDirSync(home)], []); // no pid file, no command
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("FOREGROUND_SH: the gate's directory, then the command's stdin whole, as bash -c", async () => {
  const home = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${home}/sub`);
    const data = "line 1\n\0binary\nno newline";
    const r = await login(home, "exec-1-5", 'pwd; echo "$0 $#"; cat', {
      stdin: `${home}/sub\0${data}`,
    });
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, `${home}/sub\nbash 0\n${data}`);
    // relative: under home; empty: home
    assert.equal((await login(home, "exec-1-6", "pwd", { stdin: "sub\0" })).out, `${home}/sub\n`);
    assert.equal((await login(home, "exec-1-7", "pwd")).out, `${home}\n`);
    // the command's own line numbers, as `bash -c` gives them
    const e = await login(home, "exec-1-8", "true\nno_such_cmd_x\nexit 4");
    assert.equal(e.code, 4);
    assert.match(e.err, /^bash: line 2: no_such_cmd_x: command not found$/m);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("FOREGROUND_SH: hostile directories and env values are data; a missing cwd is 125", async () => {
  const home = await Deno.makeTempDir();
  const HOSTILE = ["$(touch pwned)", "`touch pwned`", "'; touch pwned; '", "a'b\"c\\d$HOME\n!x"];
  try {
    for (const v of HOSTILE) {
      const dir = `${home}/${v.replaceAll("/", "_")}`;
      await Deno.mkdir(dir);
      const setup = `export V='${v.replaceAll("'", "'\\''")}'\n`;
      const r = await login(home, "exec-2-0", 'printf "%s|" "$V"; pwd', {
        stdin: `${dir}\0`,
        setup,
      });
      assert.equal(r.code, 0, r.err);
      assert.equal(r.out, `${v}|${dir}\n`);
      const gone = await login(home, "exec-2-1", "touch ran", { stdin: `${dir}/none/${v}\0` });
      assert.equal(gone.code, 125);
    }
    const left = [...Deno.readDirSync(home)].flatMap((e) =>
      e.isDirectory ? [...Deno.readDirSync(`${home}/${e.name}`)].map((f) => f.name) : [e.name]
    );
    assert.ok(!left.includes("pwned") && !left.includes("ran"), left.join(","));
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

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

Deno.test("foregroundArgv: setsid, setpriv to the user, timeout only when set, the parts last", () => {
  const a = foregroundArgv("agentuser", "exec-1-3", "", "export A='1'\n", "true");
  assert.deepEqual(a.slice(0, 7), [
    "setsid",
    "-w",
    "setpriv",
    "--reuid=agentuser",
    "--regid=agentuser",
    "--init-groups",
    "--reset-env",
  ]);
  assert.deepEqual(a.slice(7, 11), ["bash", "-l", "-c", FOREGROUND_LINE]);
  assert.deepEqual(a.slice(11), ["bash", "exec-1-3", FOREGROUND_SH + "export A='1'\n", "true"]);
  const t = foregroundArgv("agentuser", "exec-1-4", "2.5", "", "true");
  assert.deepEqual(t.slice(7, 11), ["timeout", "-k", "10s", "2.5s"]);
});
