import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { STAMP_PREFIX } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { Session, type SessionDeps } from "./session.ts";
import { replay } from "./replay.ts";

const ME = "100-1";
const OWNER = "0:/state";
const PATH = "/1.0/instances/mcp-k";

/** An instance made from tpl-dev under key k1, with `stamps` on top. */
function instance(stamps: Record<string, string>) {
  const config: Record<string, string> = {};
  const all = {
    type: "instance",
    profile: "tpl-dev",
    parent: "tpl-dev",
    "mcp-owner": OWNER,
    "mcp-idempotency-key": "k1",
    ...stamps,
  };
  for (const [k, v] of Object.entries(all)) config[STAMP_PREFIX + k] = v;
  return { name: "mcp-k", status: "Running", config, devices: {}, profiles: [], created_at: "t" };
}

/** What a keyed repeat asking for tpl-other gets for `inst` (§5's decision order). */
async function repeatOtherTemplate(inst: ReturnType<typeof instance>) {
  const fake = await startFakeIncusd([
    { route: `GET ${PATH}`, metadata: instance({ "mcp-session": ME }) },
    { route: `PUT ${PATH}`, metadata: {} },
  ]);
  const incus = createIncusClient({ socket: fake.socket });
  const s = new Session({
    incus,
    id: ME,
    owner: OWNER,
    pid: 100,
    cwd: "/w",
    now: () => 0,
    sleep: () => Promise.resolve(),
    alive: (id: string) => id === "200-2",
  } as unknown as SessionDeps);
  try {
    const e = await replay(s, inst as never, { template: "tpl-other", idempotency_key: "k1" })
      .then(() => undefined, (e) => e);
    assert.ok(e instanceof RefusalError, String(e));
    return {
      code: e.code,
      held: s.held.has("mcp-k"),
      writes: fake.requests.filter((r) => r.method === "PUT").length,
    };
  } finally {
    incus.close();
    await fake.close();
  }
}

Deno.test("a keyed repeat asking for another template: kept and live-holder refusals come first (§5 steps 1-2)", async () => {
  const kept = await repeatOtherTemplate(instance({ "mcp-kept": "t", "mcp-session": "300-3" }));
  assert.deepEqual(kept, { code: "refused", held: false, writes: 0 });
  const elsewhere = await repeatOtherTemplate(instance({ "mcp-session": "200-2" }));
  assert.deepEqual(elsewhere, { code: "not_held", held: false, writes: 0 });
});

Deno.test("a keyed repeat asking for another template: an orphan is adopted, then refused invalid_argument (§5 steps 3-4)", async () => {
  const orphan = await repeatOtherTemplate(instance({ "mcp-session": "300-3" }));
  assert.equal(orphan.code, "invalid_argument");
  assert.equal(orphan.held, true);
  assert.equal(orphan.writes, 1);
  const mine = await repeatOtherTemplate(instance({ "mcp-session": ME }));
  assert.deepEqual(mine, { code: "invalid_argument", held: false, writes: 0 });
});
