import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { STAMP_PREFIX } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { Session, type SessionDeps } from "./session.ts";
import { takeOver } from "./take_over.ts";
import { SWEEP_POLL_MS, SWEEP_WAIT_MS } from "./sweep_mark.ts";

const ME = "100-1";
const PATH = "/1.0/instances/mcp-x";

function instance(stamps: Record<string, string>, status = "Running") {
  const config: Record<string, string> = {};
  for (const [k, v] of Object.entries({ type: "instance", profile: "tpl-dev", ...stamps })) {
    config[STAMP_PREFIX + k] = v;
  }
  return { name: "mcp-x", status, config, devices: {}, profiles: [], created_at: "2026-01-01" };
}

/**
 * takeOver against a fake incusd that answers the read-back with a sweep's mark; `onSleep`
 * changes what incusd answers while adoption waits (the sweep finishing its step).
 */
async function adopt(
  onSleep: (n: number, fake: Awaited<ReturnType<typeof startFakeIncusd>>) => void,
) {
  const fake = await startFakeIncusd([
    { route: `GET ${PATH}`, metadata: instance({ "mcp-session": ME, "pending-op": "stopping" }) },
    { route: `PUT ${PATH}`, metadata: {} },
  ]);
  const incus = createIncusClient({ socket: fake.socket });
  let t = 0, sleeps = 0;
  const s = new Session({
    incus,
    id: ME,
    owner: "0:/state",
    pid: 100,
    cwd: "/w",
    now: () => t,
    sleep: (ms: number) => {
      t += ms;
      onSleep(++sleeps, fake);
      return Promise.resolve();
    },
  } as unknown as SessionDeps);
  try {
    const r = await takeOver(s, instance({ "mcp-session": "200-2" }) as never).then(
      (inst) => ({ inst }),
      (e) => ({ error: e as RefusalError }),
    );
    const unread = s.held.get("mcp-x")?.tasksUnread === true;
    return { ...r, held: s.held.has("mcp-x"), unread, elapsed: t, sleeps };
  } finally {
    incus.close();
    await fake.close();
  }
}

Deno.test("takeOver meeting a sweep's stop: waits, then answers the instance as it is now (stopped as dormant)", async () => {
  const r = await adopt((n, fake) => {
    if (n === 3) {
      fake.route({
        route: `GET ${PATH}`,
        metadata: instance({ "mcp-session": ME, "mcp-dormant": "t 200-2" }, "Stopped"),
      });
    }
  });
  assert.ok("inst" in r, JSON.stringify(r));
  assert.equal(r.inst.status, "Stopped");
  assert.equal(r.held, true);
  assert.equal(r.unread, false);
  assert.equal(r.elapsed, 3 * SWEEP_POLL_MS);
});

Deno.test("takeOver meeting a sweep's delete: not_found, and nothing held", async () => {
  const r = await adopt((n, fake) => {
    if (n === 1) fake.route({ route: `GET ${PATH}`, status: 404, error: "not found" });
  });
  assert.ok("error" in r);
  assert.equal(r.error.code, "not_found");
  assert.match(r.error.message, /destroyed by the orphan sweep/);
  assert.equal(r.held, false);
});

Deno.test("takeOver: another session's stamp winning meanwhile is not_held; a mark left after 30 s is busy, held", async () => {
  const lost = await adopt((n, fake) => {
    if (n === 2) {
      fake.route({ route: `GET ${PATH}`, metadata: instance({ "mcp-session": "300-3" }) });
    }
  });
  assert.ok("error" in lost);
  assert.equal(lost.error.code, "not_held");
  assert.equal(lost.held, false);
  const stuck = await adopt(() => {});
  assert.ok("error" in stuck);
  assert.equal(stuck.error.code, "busy");
  assert.match(stuck.error.message, /still stopping/);
  assert.equal(stuck.held, true, "held by the caller, who adopts again to finish");
  assert.equal(stuck.unread, true, "the next adopt_instance reads its task records");
  assert.equal(stuck.elapsed, SWEEP_WAIT_MS);
});
