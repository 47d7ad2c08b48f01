import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import { STAMP_PREFIX } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { Session, type SessionDeps } from "./session.ts";
import { replay } from "./replay.ts";
import { builtinDefinitions } from "../templates/load.ts";
import { MCP_DEFAULTS } from "./config.ts";

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

/**
 * A session over a fake incusd whose instance mcp-k reads back as `back` (held here), with a
 * task engine whose record read answers `records` (a list of ids, or an error).
 */
async function session(back: ReturnType<typeof instance>, records: string[] | Error = []) {
  const fake = await startFakeIncusd([
    { route: `GET ${PATH}`, metadata: back },
    { route: `PUT ${PATH}`, metadata: {} },
  ]);
  const incus = createIncusClient({ socket: fake.socket });
  const started: string[] = [];
  const s = new Session({
    incus,
    id: ME,
    owner: OWNER,
    pid: 100,
    cwd: "/w",
    now: () => 0,
    sleep: () => Promise.resolve(),
    alive: (id: string) => id === "200-2",
    readConfig: () => ({ ...MCP_DEFAULTS, templates: ["tpl-dev"], source: "/x/mcp.yaml" }),
    definitions: () => builtinDefinitions(),
    audit: () => {},
    tasks: {
      adopt: (_s: unknown, name: string) =>
        records instanceof Error ? Promise.reject(records) : Promise.resolve(
          started.push(`records ${name}`) && records,
        ),
    },
  } as unknown as SessionDeps);
  const puts = () => fake.requests.filter((r) => r.method === "PUT");
  return {
    s,
    fake,
    started,
    puts,
    async [Symbol.asyncDispose]() {
      incus.close();
      await fake.close();
    },
  };
}

/** What a keyed repeat asking for tpl-other gets for `inst` (§5's decision order). */
async function repeatOtherTemplate(inst: ReturnType<typeof instance>) {
  await using t = await session(instance({ "mcp-session": ME }));
  const e = await replay(t.s, inst as never, { template: "tpl-other", idempotency_key: "k1" })
    .then(() => undefined, (e) => e);
  assert.ok(e instanceof RefusalError, String(e));
  return { code: e.code, held: t.s.held.has("mcp-k"), writes: t.puts().length };
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

Deno.test("a keyed repeat adopting an orphan reads its task records; unreadable ones release it again, unavailable", async () => {
  {
    await using t = await session(instance({ "mcp-session": ME }));
    const r = await replay(t.s, instance({ "mcp-session": "300-3" }) as never, {
      template: "tpl-dev",
      idempotency_key: "k1",
    });
    assert.equal(r.replayed, true);
    assert.deepEqual(t.started, ["records mcp-k"]);
    assert.equal(t.s.held.has("mcp-k"), true);
  }
  {
    await using t = await session(instance({ "mcp-session": ME }), new Error("exec failed"));
    const e = await replay(t.s, instance({ "mcp-session": "300-3" }) as never, {
      template: "tpl-dev",
      idempotency_key: "k1",
    }).then(() => undefined, (e) => e);
    assert.ok(e instanceof RefusalError, String(e));
    assert.equal(e.code, "unavailable");
    assert.match(e.message, /released again/);
    assert.equal(t.s.held.has("mcp-k"), false);
    // the take-over, then the release: the orphan stamp names this session again
    const body = new TextDecoder().decode(t.puts().at(-1)!.body);
    const last = JSON.parse(body) as { config: Record<string, string> };
    assert.match(last.config[`${STAMP_PREFIX}mcp-orphaned`] ?? "", new RegExp(` ${ME}$`));
  }
});
