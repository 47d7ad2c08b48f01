import assert from "node:assert/strict";
import type { ExecSession, IncusClient } from "../../rpc/mod.ts";
import { runForeground } from "./foreground.ts";

/** A clock whose sleeps pass at once, advancing its time. */
function fakeClock() {
  let t = 0;
  return {
    now: () => t,
    sleep: (ms: number) => {
      t += ms;
      return Promise.resolve();
    },
  };
}

/** An Incus client whose exec never ends and whose output stays open (a guest that ignores
 * every kill), and whose script execs record their argv. Only what runForeground touches. */
function stuckGuest() {
  const killArgs: string[][] = [];
  let closed = false;
  const ends: (() => void)[] = [];
  const open = () =>
    new ReadableStream<Uint8Array>({ start: (c) => void ends.push(() => c.close()) });
  const session: ExecSession = {
    operation: "op",
    stdout: open(),
    stderr: open(),
    exit: new Promise<number>(() => {}),
    write: () => Promise.resolve(),
    closeStdin: () => Promise.resolve(),
    signal: () => Promise.resolve(),
    resize: () => Promise.resolve(),
    close: () => {
      closed = true; // as the real session does: dropping the sockets ends the streams
      for (const end of ends.splice(0)) end();
    },
  };
  const incus = {
    exec: () => Promise.resolve(session),
    execCapture: (_n: string, argv: string[]) => {
      killArgs.push(argv.slice(4));
      return Promise.resolve({ exitCode: 0, stdout: new Uint8Array(), stderr: new Uint8Array() });
    },
  } as unknown as IncusClient;
  return { incus, killArgs, closed: () => closed };
}

Deno.test("runForeground that cannot kill its command gives up after three tries: exit -1", async () => {
  const g = stuckGuest();
  const ac = new AbortController();
  const run = runForeground({ incus: g.incus, clock: fakeClock(), user: "agentuser" }, "i1", {
    command: "sleep 1000",
    outputBytes: 1024,
    signal: ac.signal,
  });
  await new Promise((r) => setTimeout(r, 10));
  ac.abort();
  const r = await run;
  assert.deepEqual([r.exit_code, r.cancelled, r.timed_out], [-1, true, false]);
  assert.equal(g.killArgs.length, 3);
  for (const a of g.killArgs) assert.match(a[1]!, /^exec-\d+-\d+$/);
  assert.equal(g.closed(), true);
});

Deno.test("runForeground with an already aborted signal runs nothing", async () => {
  const g = stuckGuest();
  const ac = new AbortController();
  ac.abort();
  const r = await runForeground({ incus: g.incus, clock: fakeClock(), user: "agentuser" }, "i1", {
    command: "true",
    outputBytes: 1024,
    signal: ac.signal,
  });
  assert.deepEqual([r.exit_code, r.cancelled, r.stdout_bytes], [-1, true, 0]);
  assert.equal(g.killArgs.length, 0);
});

Deno.test("runForeground refuses oversized stdin and a bad timeout before any exec", async () => {
  const g = stuckGuest();
  const deps = { incus: g.incus, clock: fakeClock(), user: "agentuser" };
  const base = { command: "true", outputBytes: 1024, signal: new AbortController().signal };
  await assert.rejects(
    runForeground(deps, "i1", { ...base, stdin: "x".repeat(1024 * 1024 + 1) }),
    /stdin/,
  );
  await assert.rejects(
    runForeground(deps, "i1", { ...base, timeoutSeconds: 0 }),
    /timeout_seconds/,
  );
  await assert.rejects(
    runForeground(deps, "i1", { ...base, timeoutSeconds: NaN }),
    /timeout_seconds/,
  );
  assert.equal(g.killArgs.length, 0);
});

/** An output stream that ends with `exit` (as incusd closes it), unless it was cancelled. */
function output(exit: Promise<number>): ReadableStream<Uint8Array> {
  let open = true;
  return new ReadableStream({
    start: (c) => void exit.then(() => open && c.close()),
    cancel: () => void (open = false),
  });
}

/** A guest whose login shell ends at the end of its stdin, recording what it was sent. */
function gatedGuest(o: { execFails?: boolean } = {}) {
  const sent: string[] = [];
  const ev: string[] = [];
  let end = (_code: number) => {};
  const exit = new Promise<number>((r) => end = r);
  const session: ExecSession = {
    operation: "op",
    stdout: output(exit),
    stderr: output(exit),
    exit,
    write: (d) => {
      sent.push(new TextDecoder().decode(d));
      return Promise.resolve();
    },
    closeStdin: () => {
      ev.push("eof");
      end(0);
      return Promise.resolve();
    },
    signal: () => Promise.resolve(),
    resize: () => Promise.resolve(),
    close: () => void ev.push("close"),
  };
  const incus = {
    exec: () => {
      ev.push("exec");
      return o.execFails
        ? Promise.reject(new Error("Instance is not running"))
        : Promise.resolve(session);
    },
    execCapture: () => {
      ev.push("kill");
      return Promise.resolve({ exitCode: 0, stdout: new Uint8Array(), stderr: new Uint8Array() });
    },
  } as unknown as IncusClient;
  return { incus, sent, ev };
}

const deps = (incus: IncusClient) => ({ incus, clock: fakeClock(), user: "agentuser" });
const base = { command: "true", outputBytes: 1024, signal: new AbortController().signal };

Deno.test("runForeground arms the login shell with the directory, then the stdin", async () => {
  const g = gatedGuest();
  const cwd = new Promise<string>((r) => setTimeout(() => r("/srv/a b"), 5));
  const r = await runForeground(deps(g.incus), "i1", { ...base, cwd, stdin: "in\0put" });
  assert.equal(r.exit_code, 0);
  assert.deepEqual(g.sent, ["/srv/a b\0in\0put"]);
  assert.deepEqual(g.ev, ["exec", "eof", "close"]); // the exec started before the check ended
});

Deno.test("runForeground: a refused check ends the exec unarmed and throws the refusal", async () => {
  const g = gatedGuest();
  const refusal = new Error("not_held");
  await assert.rejects(
    runForeground(deps(g.incus), "i1", { ...base, cwd: Promise.reject(refusal) }),
    (e) => e === refusal,
  );
  assert.deepEqual(g.sent, []); // no directory: nothing runs
  assert.deepEqual(g.ev, ["exec", "eof", "close"]);
  // the refusal wins over the exec's own failure (a stopped instance refuses the exec too)
  const f = gatedGuest({ execFails: true });
  await assert.rejects(
    runForeground(deps(f.incus), "i1", { ...base, cwd: Promise.reject(refusal) }),
    (e) => e === refusal,
  );
  await assert.rejects(
    runForeground(deps(f.incus), "i1", { ...base, cwd: "/" }),
    /not running/,
  );
  // a directory with NUL could not end the gate: refused, nothing sent
  const n = gatedGuest();
  await assert.rejects(runForeground(deps(n.incus), "i1", { ...base, cwd: "/a\0b" }), /NUL/);
  assert.deepEqual(n.sent, []);
});

Deno.test("runForeground cancelled while the check runs: unarmed, no kill, cancelled", async () => {
  const g = gatedGuest();
  const ac = new AbortController();
  const cwd = new Promise<string>((r) =>
    setTimeout(() => {
      ac.abort();
      r("/");
    }, 5)
  );
  const r = await runForeground(deps(g.incus), "i1", { ...base, cwd, signal: ac.signal });
  assert.deepEqual([r.exit_code, r.cancelled], [-1, true]);
  assert.deepEqual(g.sent, []);
  assert.deepEqual(g.ev, ["exec", "eof", "close"]);
});
