import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { CAT, FakeExecClient, type FakeSession } from "../../../tests/fakes/exec_client.ts";
import type { ExecControl } from "./registry.ts";
import { BUFFER_LIMIT, OUTPUT_WINDOW, runExec, STDIN_CHUNK } from "./exec.ts";
import { findGroup, findPasswd, loginShell, resolveExecUser } from "./user.ts";

const text = (b: Uint8Array | undefined) => new TextDecoder().decode(b);

Deno.test("runExec buffers stdout and stderr and returns a non-zero exit as a result", async () => {
  const c = new FakeExecClient();
  c.program = (s) => {
    s.out("out");
    s.err("err");
    s.end(3);
  };
  const r = await runExec(c, { name: "web", argv: ["sh", "-c", "x"] });
  assert.equal(r.exitCode, 3);
  assert.equal(text(r.stdout), "out");
  assert.equal(text(r.stderr), "err");
  assert.deepEqual(c.sessions[0]!.options.command, ["sh", "-c", "x"]);
  assert.equal(c.sessions[0]!.options.user, 0);
  assert.equal(c.captures.length, 0, "root needs no lookup");
  assert.ok(c.sessions[0]!.closed);
});

Deno.test("runExec with an empty argv is invalid", async () => {
  await assert.rejects(
    runExec(new FakeExecClient(), { name: "web", argv: [] }),
    (e) => e instanceof IsbError && e.code === "invalid" && e.message === "exec needs a command",
  );
});

Deno.test("runExec stdin null sends EOF at once", async () => {
  const c = new FakeExecClient();
  const r = await runExec(c, { name: "web", argv: ["cat"] });
  assert.equal(r.exitCode, 0);
  assert.ok(c.sessions[0]!.stdinClosed);
  assert.equal(c.sessions[0]!.stdin.length, 0);
});

Deno.test("runExec stdin bytes go in 64 KiB chunks, then EOF", async () => {
  const c = new FakeExecClient();
  const data = new Uint8Array(STDIN_CHUNK * 2 + 5).map((_, i) => i % 251);
  const r = await runExec(c, { name: "web", argv: ["cat"], stdin: data });
  assert.deepEqual(c.sessions[0]!.stdin.map((x) => x.length), [STDIN_CHUNK, STDIN_CHUNK, 5]);
  assert.deepEqual(r.stdout, data);
});

Deno.test("runExec streams chunks in order and waits for writes beyond the window", async () => {
  const c = new FakeExecClient();
  const total = OUTPUT_WINDOW * 2;
  c.program = (s) => {
    for (let i = 0; i < total; i++) s.out(`${i},`);
    s.end(0);
  };
  const seen: string[] = [];
  let maxUnwritten = 0;
  let unwritten = 0;
  const r = await runExec(c, { name: "web", argv: ["x"] }, {
    onOutput: (stream, chunk) => {
      seen.push(`${stream}:${text(chunk)}`);
      unwritten++;
      maxUnwritten = Math.max(maxUnwritten, unwritten);
      return new Promise((ok) => setTimeout(() => ok(void unwritten--), 0));
    },
  });
  assert.deepEqual(r, { exitCode: 0 });
  assert.equal(seen.length, total);
  assert.equal(seen[7], "stdout:7,");
  assert.ok(maxUnwritten <= OUTPUT_WINDOW, `${maxUnwritten} unwritten`);
});

Deno.test("runExec piped stdin takes write and close through the controller", async () => {
  const c = new FakeExecClient();
  let control: ExecControl | undefined;
  const run = runExec(c, { name: "web", argv: ["cat"], stdin: "piped" }, {
    onStart: (ctl) => (control = ctl),
  });
  while (!control) await new Promise((r) => setTimeout(r, 1));
  await control.write(new TextEncoder().encode("hi "));
  await control.write(new TextEncoder().encode("there"));
  await control.closeStdin();
  await control.closeStdin(); // a second close is a no-op
  await assert.rejects(
    control.write(new Uint8Array([1])),
    (e) => e instanceof IsbError && e.code === "websocket" && e.message === "stdin is closed",
  );
  assert.equal(text((await run).stdout), "hi there");
});

Deno.test("runExec controller refuses stdin calls when stdin is not piped", async () => {
  const c = new FakeExecClient();
  c.gate = Promise.resolve();
  let release!: () => void;
  const hold = new Promise<void>((r) => (release = r));
  c.program = async (s) => {
    await hold;
    s.end(0);
  };
  let control: ExecControl | undefined;
  const run = runExec(c, { name: "web", argv: ["sleep"] }, { onStart: (ctl) => (control = ctl) });
  while (!control) await new Promise((r) => setTimeout(r, 1));
  for (const call of [() => control!.write(new Uint8Array([1])), () => control!.closeStdin()]) {
    await assert.rejects(call(), (e) =>
      e instanceof IsbError && e.code === "invalid" &&
      e.message === "stdin is not piped");
  }
  await control.resize(100, 40); // no tty: a no-op success
  await control.signal(1);
  assert.deepEqual(c.sessions[0]!.resizes, []);
  assert.deepEqual(c.sessions[0]!.signals, [1]);
  release();
  await run;
});

Deno.test("runExec with a tty sets TERM, the size, and forwards resize", async () => {
  const c = new FakeExecClient();
  let control: ExecControl | undefined;
  const run = runExec(c, { name: "web", argv: ["sh"], tty: true, stdin: "piped", term: "vt100" }, {
    onStart: (ctl) => (control = ctl),
  });
  while (!control) await new Promise((r) => setTimeout(r, 1));
  await control.resize(120, 50);
  await control.closeStdin();
  await run;
  const s = c.sessions[0]!;
  assert.equal(s.options.interactive, true);
  assert.equal(s.options.env?.TERM, "vt100");
  assert.deepEqual([s.options.width, s.options.height], [80, 24]);
  assert.deepEqual(s.resizes, [[120, 50]]);
  assert.deepEqual(s.stdin, [new Uint8Array([4])], "a tty's EOF is ^D");
  assert.equal(s.stdinClosed, false, "never the end-of-stdin barrier on a pty");
});

Deno.test("runExec on a tty ends a pending line with ^D twice", async () => {
  const c = new FakeExecClient();
  await runExec(c, {
    name: "web",
    argv: ["cat"],
    tty: true,
    stdin: new TextEncoder().encode("ab"),
  });
  assert.deepEqual(c.sessions[0]!.stdin.map((x) => [...x]), [[97, 98], [4, 4]]);
  await runExec(c, { name: "web", argv: ["cat"], tty: true });
  assert.deepEqual(c.sessions[1]!.stdin.map((x) => [...x]), [[4]]);
});

Deno.test("runExec timeout kills with signal 9 and fails exec_timeout", async () => {
  const c = new FakeExecClient();
  c.program = () => {}; // never exits on its own
  await assert.rejects(
    runExec(c, { name: "web", argv: ["sleep", "100"], timeoutMs: 50 }),
    (e) =>
      e instanceof IsbError && e.code === "exec_timeout" &&
      e.message === "exec sleep 100 timed out after 50ms (killed)" &&
      JSON.stringify(e.data) === '{"timeout_secs":0.05}',
  );
  assert.deepEqual(c.sessions[0]!.signals, [9]);
});

const USERS = [
  { spec: "dev", uid: 1000, gid: 1000, home: "/home/dev", viaGetent: true },
  { spec: "dev:staff", uid: 1000, gid: 50, home: "/home/dev", viaGetent: true },
  { spec: "1000", uid: 1000, gid: 1000, home: "/home/dev", viaGetent: false },
  { spec: "1000:7", uid: 1000, gid: 7, home: "/home/dev", viaGetent: false },
  { spec: "4242", uid: 4242, gid: 4242, home: undefined, viaGetent: false },
];

for (const u of USERS) {
  Deno.test(`resolveExecUser resolves ${JSON.stringify(u.spec)}`, async () => {
    const c = new FakeExecClient();
    const r = await resolveExecUser(c, "web", u.spec);
    assert.deepEqual([r.uid, r.gid, r.entry?.home], [u.uid, u.gid, u.home]);
    assert.equal(c.captures.some((a) => a[1] === "passwd"), u.viaGetent);
  });
}

Deno.test("resolveExecUser falls back to /etc/passwd when getent is missing", async () => {
  const c = new FakeExecClient();
  c.getent = false;
  const r = await resolveExecUser(c, "web", "dev:staff");
  assert.deepEqual([r.uid, r.gid], [1000, 50]);
});

Deno.test("resolveExecUser rejects an unknown user or group as invalid", async () => {
  const c = new FakeExecClient();
  await assert.rejects(resolveExecUser(c, "web", "nobody2"), {
    code: "invalid",
    message: "no such user nobody2 in web",
  });
  await assert.rejects(resolveExecUser(c, "web", "dev:wheel9"), {
    code: "invalid",
    message: "no such group wheel9 in web",
  });
});

Deno.test("resolveExecUser lets infrastructure errors surface as themselves", async () => {
  const c = new FakeExecClient();
  c.failure = new IsbError("connect", "cannot connect to incusd at /x: refused", {
    data: { socket: "/x" },
  });
  await assert.rejects(resolveExecUser(c, "web", "dev"), { code: "connect" });
  await assert.rejects(resolveExecUser(c, "web", "1000"), { code: "connect" });
});

Deno.test("runExec sets HOME, USER, LOGNAME and cwd from the passwd entry unless given", async () => {
  const c = new FakeExecClient();
  await runExec(c, { name: "web", argv: ["env"], user: "dev", env: { USER: "keep" } });
  const o = c.sessions[0]!.options;
  assert.deepEqual(o.env, { USER: "keep", HOME: "/home/dev", LOGNAME: "dev" });
  assert.equal(o.cwd, "/home/dev");
  assert.deepEqual([o.user, o.group], [1000, 1000]);
  await runExec(c, { name: "web", argv: ["pwd"], user: "dev", cwd: "/tmp" });
  assert.equal(c.sessions[1]!.options.cwd, "/tmp");
});

Deno.test("runExec login wraps argv in the user's login shell", async () => {
  const c = new FakeExecClient();
  await runExec(c, { name: "web", argv: ["echo", "a b"], login: true });
  assert.deepEqual(c.sessions[0]!.options.command, [
    "/bin/bash",
    "-l",
    "-c",
    'exec "$@"',
    "isb",
    "echo",
    "a b",
  ]);
  await runExec(c, { name: "web", argv: ["id"], login: true, user: "svc" });
  assert.equal(c.sessions[1]!.options.command[0], "/bin/sh", "nologin falls back to /bin/sh");
});

Deno.test("passwd and group parsing", () => {
  const p = "a:x:1:2:A:/h:/bin/zsh\nbroken\n";
  assert.deepEqual(findPasswd(p, "a"), {
    name: "a",
    uid: 1,
    gid: 2,
    home: "/h",
    shell: "/bin/zsh",
  });
  assert.equal(findPasswd(p, 1)?.name, "a");
  assert.equal(findPasswd(p, "broken"), undefined);
  assert.equal(findGroup("g:x:9:\n", "g"), 9);
  assert.equal(loginShell(undefined), "/bin/sh");
  assert.equal(loginShell(findPasswd("f:x:1:1::/:/bin/false", "f")), "/bin/sh");
});

Deno.test("runExec exit code and output arrive even when the program ignores stdin", async () => {
  const c = new FakeExecClient();
  c.program = (s: FakeSession) => {
    s.out("done");
    s.end(0);
  };
  const r = await runExec(c, { name: "web", argv: ["x"], stdin: new Uint8Array(200_000) });
  assert.equal(text(r.stdout), "done");
  void CAT;
});

Deno.test("runExec kills a buffered exec past the output limit and says how to stream instead", async () => {
  const c = new FakeExecClient();
  c.program = (s) => {
    s.out("0123456789");
    s.err("abcdef"); // 16 bytes in all: over a 12-byte limit
    s.out("dropped"); // the command has not noticed the kill yet
  };
  await assert.rejects(
    runExec(c, { name: "web", argv: ["yes"], bufferLimit: 12 }),
    (e) =>
      e instanceof IsbError && e.code === "invalid" &&
      e.message.includes("exec yes wrote more than") &&
      e.message.includes("the limit of a buffered exec (killed)") &&
      e.message.includes('pass "stream": true'),
  );
  assert.deepEqual(c.sessions[0]!.signals, [9]);
  assert.ok(c.sessions[0]!.closed);
});

Deno.test("runExec buffers output up to the limit exactly, and streams past it", async () => {
  const c = new FakeExecClient();
  c.program = (s) => {
    s.out("0123456789");
    s.err("ab");
    s.end(0);
  };
  const r = await runExec(c, { name: "web", argv: ["x"], bufferLimit: 12 });
  assert.equal(text(r.stdout) + text(r.stderr), "0123456789ab");
  const seen: string[] = [];
  const s = await runExec(c, { name: "web", argv: ["x"], bufferLimit: 4 }, {
    onOutput: (_, chunk) => void seen.push(text(chunk)),
  });
  assert.deepEqual(s, { exitCode: 0 });
  assert.equal(seen.join(""), "0123456789ab");
  assert.deepEqual(c.sessions[1]!.signals, []);
});

Deno.test("BUFFER_LIMIT is 32 MiB", () => {
  assert.equal(BUFFER_LIMIT, 32 * 1024 * 1024);
});
