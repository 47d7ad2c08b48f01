/**
 * A server killed with SIGKILL in the middle of a keyed `create_instance`, then a new server
 * repeating the call (shared/spec/isx-mcp.md §5, seed 000): killed once the instance was made,
 * the repeat replays it at once (the dead server's lock went with it: never `not_held`), and
 * `isx list` already shows it orphaned; killed while the copy was still being made (marked
 * `mcp-creating`), the half-made copy never answers for the key: the repeat destroys it and
 * makes the instance anew. Either way exactly one instance carries the key afterwards.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient, type Instance } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import {
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  until as poll,
} from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { call, connect, makeHome, mcpCommand, type McpHome, rawServer } from "../helpers/mcp.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
const NP = ["--no-preflight"];
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

const until = <T>(what: string, f: () => Promise<T | undefined>, ms: number) =>
  poll(what, f, ms, 50);

/** A live-test home, its key, and the instances carrying that key. */
function setup() {
  const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
  const h: McpHome = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
  const key = `kill-${crypto.randomUUID().slice(0, 8)}`;
  const underKey = async () =>
    (await incus.listInstances()).filter((i) =>
      readStamps(i.config)["mcp-idempotency-key"] === key
    );
  const cleanup = async () => {
    for (const i of await incus.listInstances()) {
      if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
        await removeInstance(incus, i.name);
      }
    }
    incus.close();
  };
  return { incus, h, key, underKey, cleanup };
}

/** Starts `isx mcp`, sends the keyed create, SIGKILLs the server once `when` holds. */
async function killMidCreate(
  h: McpHome,
  key: string,
  underKey: () => Promise<Instance[]>,
  when: (i: Instance) => boolean,
  what: string,
): Promise<Instance> {
  await using p = await rawServer(h, "crashy", NP);
  await p.send({
    jsonrpc: "2.0",
    id: 2,
    method: "tools/call",
    params: {
      name: "create_instance",
      arguments: { template: TEMPLATE, name_hint: "kill", idempotency_key: key },
    },
  });
  const seen = await until(what, async () => (await underKey()).find(when), 120_000);
  p.child.kill("SIGKILL");
  await p.child.status;
  return seen;
}

Deno.test({
  name:
    "a server killed with SIGKILL once the keyed instance was made: a new server replays the key at once (never not_held), and exactly one instance exists",
  ignore: NO_INCUS,
  async fn() {
    const { h, key, underKey, cleanup } = setup();
    try {
      await killMidCreate(
        h,
        key,
        underKey,
        (i) => i.status === "Running" && !readStamps(i.config)["mcp-creating"],
        "the instance under the key made",
      );
      // isx list already tells: the holder is dead, its instance is an orphan (no sweep yet)
      const [made] = await underKey();
      const { env } = mcpCommand(h);
      await using ls = spawnProgram(["list", "--json"], { env, prog: "isx", cwd: h.dir });
      await ls.closeStdin();
      const lines: string[] = [];
      for (let l = await ls.readLine(60_000); l !== undefined; l = await ls.readLine(60_000)) {
        lines.push(l);
      }
      const rows = JSON.parse(lines.join("\n")) as { name: string; mcp_state: string }[];
      assert.equal(rows.find((r) => r.name === made!.name)?.mcp_state, "orphaned", ls.stderr());
      const c = await connect(h, "modern", { extra: NP });
      try {
        // the killed server's lock died with it: the first repeat is already a replay, never
        // not_held (mcp/host/session_locks.ts)
        const r = sc(
          await call(c, "create_instance", { template: TEMPLATE, idempotency_key: key }),
        );
        assert.equal(r.replayed, true, JSON.stringify(r));
        const all = await underKey();
        assert.equal(all.length, 1);
        assert.equal(r.instance, all[0]!.name);
      } finally {
        await c.close();
      }
    } finally {
      await cleanup();
    }
  },
});

Deno.test({
  name:
    "a server killed with SIGKILL while the keyed copy was being made: the half-made copy never answers, the repeat makes the instance anew",
  ignore: NO_INCUS,
  async fn() {
    const { incus, h, key, underKey, cleanup } = setup();
    try {
      const half = await killMidCreate(
        h,
        key,
        underKey,
        (i) => !!readStamps(i.config)["mcp-creating"],
        "the copy under the key, still marked mcp-creating",
      );
      const c = await connect(h, "modern", { extra: NP });
      try {
        const r = sc(
          await call(c, "create_instance", { template: TEMPLATE, idempotency_key: key }),
        );
        assert.equal(r.replayed, undefined, JSON.stringify(r));
        assert.notEqual(r.instance, half.name);
        const all = await underKey();
        assert.deepEqual(all.map((i) => i.name), [r.instance]);
        const made = (await incus.getInstance(String(r.instance))).value;
        assert.equal(made.status, "Running");
        assert.equal(readStamps(made.config)["mcp-creating"] ?? "", "");
        const log = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.match(log, new RegExp(`instance=${half.name} outcome=destroyed\\(half-made\\)`));
        // and the made one answers the next repeat
        const again = sc(
          await call(c, "create_instance", { template: TEMPLATE, idempotency_key: key }),
        );
        assert.deepEqual([again.instance, again.replayed], [r.instance, true]);
      } finally {
        await c.close();
      }
    } finally {
      await cleanup();
    }
  },
});
