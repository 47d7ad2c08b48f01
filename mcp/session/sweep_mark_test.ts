import assert from "node:assert/strict";
import type { Instance } from "../../rpc/base.ts";
import { STAMP_PREFIX } from "../host/stamps.ts";
import { awaitSweepMark, SWEEP_POLL_MS, SWEEP_WAIT_MS } from "./sweep_mark.ts";

const ME = "100-1";

function inst(stamps: Record<string, string>, status = "Running"): Instance {
  const config: Record<string, string> = {};
  for (const [k, v] of Object.entries(stamps)) config[STAMP_PREFIX + k] = v;
  return { name: "mcp-x", status, config } as unknown as Instance;
}

/** A scripted world: each read answers the next instance; sleeping moves the clock. */
function world(reads: (Instance | undefined)[]) {
  let t = 0;
  const slept: number[] = [];
  let n = 0;
  return {
    slept,
    get reads() {
      return n;
    },
    io: {
      read: () => Promise.resolve(reads[Math.min(n++, reads.length - 1)]),
      now: () => t,
      sleep: (ms: number, signal?: AbortSignal) => {
        if (signal?.aborted) return Promise.reject(signal.reason);
        slept.push(ms);
        t += ms;
        return Promise.resolve();
      },
    },
  };
}

const marked = (op: string) => inst({ "mcp-session": ME, "pending-op": op });

Deno.test("awaitSweepMark: a mark the sweep removes (it saw the new holder) clears; the instance is as it is now", async () => {
  const after = inst({ "mcp-session": ME, "mcp-dormant": "t old" }, "Stopped");
  const w = world([marked("stopping"), after]);
  const r = await awaitSweepMark(marked("stopping"), ME, w.io);
  assert.deepEqual(r, { kind: "clear", inst: after });
  assert.deepEqual(w.slept, [SWEEP_POLL_MS, SWEEP_POLL_MS]);
});

Deno.test("awaitSweepMark: the sweep deleted it → gone; another session's stamp won → taken", async () => {
  assert.deepEqual(await awaitSweepMark(marked("deleting"), ME, world([undefined]).io), {
    kind: "gone",
  });
  const other = inst({ "mcp-session": "200-2", "pending-op": "stopping" });
  assert.deepEqual(await awaitSweepMark(marked("stopping"), ME, world([other]).io), {
    kind: "taken",
    session: "200-2",
  });
});

Deno.test("awaitSweepMark: a mark still there after 30 s is busy (held); polled every 500 ms", async () => {
  const w = world([marked("stopping")]);
  const r = await awaitSweepMark(marked("stopping"), ME, w.io);
  assert.deepEqual(r, { kind: "busy", op: "stopping" });
  assert.equal(w.slept.reduce((a, b) => a + b, 0), SWEEP_WAIT_MS);
  assert.ok(w.slept.every((ms) => ms === SWEEP_POLL_MS));
  assert.equal(w.reads, SWEEP_WAIT_MS / SWEEP_POLL_MS);
});

Deno.test("awaitSweepMark: a cancelled adoption stops waiting", async () => {
  const ac = new AbortController();
  ac.abort(new Error("cancelled"));
  const w = world([marked("stopping")]);
  await assert.rejects(
    awaitSweepMark(marked("stopping"), ME, { ...w.io, signal: ac.signal }),
    /cancelled/,
  );
  assert.equal(w.reads, 0);
});
