/**
 * Dormancy against real Incus (shared/spec/isx-mcp.md §4.4, §2.4): an orphan kept alive only
 * by an unfinished agent run, quiet past `dormant-after-hours`, is stopped by a new session's
 * sweep and stamped `mcp-dormant`; adopting it, or repeating the keyed create that made it,
 * starts it again and clears the stamps. A real
 * agent needs an account this host does not have, so the running task is a real background
 * command whose recorded kind is rewritten to `agent` in the guest (the sweep reads kind and
 * state from the guest's files, as it would for a delegate). The earlier CPU sample, an hour
 * and more old, is stamped by the test: the sweep's spacing rule cannot be waited out here.
 * A second test checks the dormant grace: a stopped dormant orphan past it is destroyed, one
 * within it is left although past its orphan grace.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import { readStamps, stampConfig } from "../../mcp/host/stamps.ts";
import {
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  until as poll,
} from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { call, connect, makeHome, type McpHome, refusal } from "../helpers/mcp.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
const NP = ["--no-preflight"];
const KEY = `dorm-${crypto.randomUUID().slice(0, 8)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

const until = <T>(what: string, f: () => Promise<T | undefined>, ms: number) =>
  poll(what, f, ms, 500);

async function cleanup(incus: IncusClient, h: McpHome): Promise<void> {
  for (const i of await incus.listInstances()) {
    if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
      await removeInstance(incus, i.name);
    }
  }
}

Deno.test({
  name:
    "a quiet orphan kept only by an agent run is stopped as dormant by the sweep; adoption restarts it",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({
      mcp: `templates: [${TEMPLATE}]\norphan-grace-hours: 0\ndormant-after-hours: 0\n` +
        `dormant-grace-hours: 5\n`,
    });
    try {
      const a = await connect(h, "legacy", { extra: NP });
      let name = "", task = "";
      try {
        name = String(
          sc(
            await call(a, "create_instance", {
              template: TEMPLATE,
              name_hint: "dorm",
              idempotency_key: KEY,
            }),
          ).instance,
        );
        task = String(
          sc(await call(a, "exec", { instance: name, command: "sleep 900", background: true }))
            .task_id,
        );
      } finally {
        await a.close();
      }
      const kind = `/home/agentuser/.isx-mcp/tasks/${task}/kind`;
      const w = await incus.execCapture(name, ["bash", "-c", 'printf "agent\\n" >"$1"', "x", kind]);
      assert.equal(w.exitCode, 0, new TextDecoder().decode(w.stderr));
      const cpu = (await incus.getInstanceState(name)).cpu?.usage;
      assert.equal(typeof cpu, "number", "Incus reports the instance's CPU time");
      const twoHoursAgo = Date.now() - 7_200_000;
      await incus.updateInstance(name, (i) => ({
        ...i,
        config: {
          ...i.config,
          ...stampConfig({ "mcp-cpu-sample": `${twoHoursAgo} ${cpu} ${twoHoursAgo}` }),
        },
      }), { step: "stamp an old CPU sample" });

      const b = await connect(h, "legacy", { extra: NP });
      try {
        const st = await until("the orphan stopped as dormant", async () => {
          const i = (await incus.getInstance(name)).value;
          const s = readStamps(i.config);
          return i.status === "Stopped" && s["mcp-dormant"] && !s["pending-op"] ? s : undefined;
        }, 120_000);
        assert.match(st["mcp-dormant"]!, /^\d{4}-\d\d-\d\dT\S+ \S+$/);
        assert.equal(st["mcp-cpu-sample"], undefined, "the sample goes with the stop");
        const log = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.match(
          log,
          new RegExp(`tool=reap-orphans instance=${name} outcome=stopped\\(dormant\\)`),
        );
        assert.doesNotMatch(log, new RegExp(`instance=${name} outcome=destroyed`));

        const listed = (sc(await call(b, "list_instances")).instances as Record<string, unknown>[])
          .find((i) => i.instance === name)!;
        assert.equal(listed.state, "orphaned");
        assert.equal(
          Date.parse(String(listed.dormant_until)) - Date.parse(String(listed.dormant_since)),
          5 * 3_600_000,
        );
        // a start that fails (a disk whose source went missing, a real Incus refusal) answers
        // unavailable; the instance stays held and dormant, and adopting again retries
        const gone = await Deno.makeTempDir({ prefix: "isx-dormancy-" });
        const bad = { type: "disk", source: gone, path: "/mnt/x" };
        await incus.updateInstance(name, (i) => ({ ...i, devices: { ...i.devices, bad } }), {
          step: "break the instance's start",
        });
        await Deno.remove(gone); // Incus checks the source when it starts
        const failed = await call(b, "adopt_instance", { instance: name });
        assert.equal(refusal(failed), "unavailable", JSON.stringify(failed));
        const held = (await incus.getInstance(name)).value;
        assert.equal(held.status, "Stopped");
        assert.ok(readStamps(held.config)["mcp-dormant"], "dormant until a start succeeds");
        const asHeld = (sc(await call(b, "list_instances")).instances as Record<string, unknown>[])
          .find((i) => i.instance === name)!;
        assert.notEqual(asHeld.state, "orphaned", "the failed wake-up still took the instance");
        await incus.updateInstance(name, (i) => {
          const { bad: _bad, ...devices } = i.devices;
          return { ...i, devices };
        }, { step: "repair the instance" });
        // the key's repeat finishes the wake-up as adopting again would (§5 step 3), and reads
        // the instance's task records: the task is this session's now
        const again = sc(
          await call(b, "create_instance", { template: TEMPLATE, idempotency_key: KEY }),
        );
        assert.deepEqual([again.instance, again.replayed], [name, true]);
        const adopted = sc(await call(b, "adopt_instance", { instance: name }));
        assert.equal(adopted.instance, name);
        assert.deepEqual(adopted.tasks, [task]);
        // known here (not not_found); its command died with the dormant stop
        assert.equal(sc(await call(b, "task_status", { task_id: task })).state, "lost");
        const after = (await incus.getInstance(name)).value;
        assert.equal(after.status, "Running");
        const s2 = readStamps(after.config);
        assert.equal(s2["mcp-dormant"], undefined);
        assert.equal(s2["mcp-cpu-sample"], undefined);
        const log2 = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.match(
          log2,
          new RegExp(`tool=create_instance instance=${name} outcome=started\\(dormant\\)`),
        );
      } finally {
        await b.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});

Deno.test({
  name:
    "a stopped dormant orphan lives dormant-grace-hours after its stop, then the sweep destroys it",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({
      mcp: `templates: [${TEMPLATE}]\norphan-grace-hours: 0\ndormant-grace-hours: 5\n`,
    });
    const exists = async (n: string) => (await incus.listInstances()).some((i) => i.name === n);
    try {
      const a = await connect(h, "legacy", { extra: NP });
      let old = "", fresh = "";
      try {
        old = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "dold" })).instance,
        );
        fresh = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "dnew" })).instance,
        );
        await call(a, "stop_instance", { instance: old });
        await call(a, "stop_instance", { instance: fresh });
      } finally {
        await a.close();
      }
      // as the sweep leaves them: stopped, dormant since 6 h (past the 5 h grace) and since now
      for (const [name, ago] of [[old, 6], [fresh, 0]] as const) {
        await incus.updateInstance(name, (i) => {
          const holder = readStamps(i.config)["mcp-session"];
          const at = new Date(Date.now() - ago * 3_600_000).toISOString();
          return {
            ...i,
            config: { ...i.config, ...stampConfig({ "mcp-dormant": `${at} ${holder}` }) },
          };
        }, { step: "stamp dormant" });
      }
      const b = await connect(h, "legacy", { extra: NP });
      try {
        await until("the old dormant orphan destroyed", async () => {
          return (await exists(old)) ? undefined : true;
        }, 120_000);
        assert.ok(await exists(fresh), "a dormant orphan within its dormant grace is kept");
        const log = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.match(log, new RegExp(`tool=reap-orphans instance=${old} outcome=destroyed`));
        assert.doesNotMatch(log, new RegExp(`tool=reap-orphans instance=${fresh} `));
      } finally {
        await b.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});

Deno.test({
  name: "the sweep spares an idle orphan past its grace while a person is on a terminal in it",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\norphan-grace-hours: 0\n` });
    const exists = async (n: string) => (await incus.listInstances()).some((i) => i.name === n);
    try {
      const a = await connect(h, "legacy", { extra: NP });
      let alone = "", visited = "";
      try {
        alone = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "alone" })).instance,
        );
        visited = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "seen" })).instance,
        );
      } finally {
        await a.close();
      }
      // a person's shell: a process whose controlling terminal is a fresh pseudo-terminal
      const pts = await incus.execCapture(visited, [
        "bash",
        "-c",
        'setsid script -qfc "sleep 600" /dev/null </dev/null >/dev/null 2>&1 & sleep 1; ls /dev/pts',
      ]);
      assert.equal(pts.exitCode, 0, new TextDecoder().decode(pts.stderr));
      const b = await connect(h, "legacy", { extra: NP });
      try {
        await until("the idle orphan destroyed", async () => {
          return (await exists(alone)) ? undefined : true;
        }, 120_000);
        await sleep(5_000); // the sweep handles both at once: give the other its time
        assert.ok(await exists(visited), "an orphan with a person in it is in use");
        const log = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.doesNotMatch(log, new RegExp(`tool=reap-orphans instance=${visited} `));
      } finally {
        await b.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});
