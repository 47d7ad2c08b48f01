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
