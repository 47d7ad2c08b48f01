/**
 * Keyed and concurrent delegation through the SDK client and the real `isx mcp` on real
 * Incus (§2.6, §5, seed 000). A keyed `delegate` with `template` finds its first attempt
 * across sessions: after the first server is killed (SIGKILL, nobody stamps) and after a
 * clean exit that orphaned the instance, a repeat in a new server answers the same task with
 * `replayed: true` and exactly one instance exists under the key; a repeat asking for another
 * template is `invalid_argument`; a repeat while the first call still runs is `busy`. Two
 * delegations to one instance at the same moment, in one session and from a second session
 * that took the instance over, start exactly one agent; the other is refused `wrong_state`
 * and leaves no task record. The keyed fresh instances are air-gapped (a user-layer
 * `tpl-agents` with `network: airgap`, same definition hash): their agent reaches no model;
 * the concurrent runs talk to the agents lab's mock model through its proxy.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import type { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import { BUILTIN_TEMPLATES } from "../../mcp/templates/builtin.ts";
import { LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, removeInstance } from "../helpers/live.ts";
import { call, connect, makeHome, type McpHome, refusal } from "../helpers/mcp.ts";
import { AGENTS_TEMPLATE, AgentsLab, ensureTemplate, PROJECT } from "../helpers/agents_lab.ts";

const WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
const HAVE = !NO_INCUS && WANTED && await ensureTemplate().then(() => true); // built in this run's lab
if (!NO_INCUS && WANTED && !HAVE) {
  // deno-lint-ignore no-console
  console.error(`keyed delegate live tests skipped: no ${AGENTS_TEMPLATE} (isx build tpl-agents)`);
}
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;

/** The server's pid (the SDK's stdio transport spawned it). */
function serverPid(c: Client): number {
  const pid = (c.transport as StdioClientTransport | undefined)?.pid;
  assert.ok(pid, "the server runs");
  return pid;
}

/** This HOME's instances in Incus (made by its servers: their cwd stamp is the HOME). */
async function mine(incus: IncusClient, h: McpHome) {
  return (await incus.listInstances()).filter((i) => readStamps(i.config)["mcp-cwd"] === h.dir);
}

/** The agent task directories of an instance. */
async function taskDirs(incus: IncusClient, instance: string): Promise<string[]> {
  const r = await incus.execCapture(instance, [
    "sh",
    "-c",
    "ls /home/agentuser/.isx-mcp/tasks 2>/dev/null || true",
  ]);
  return new TextDecoder().decode(r.stdout).split("\n").filter(Boolean).sort();
}

async function cleanup(incus: IncusClient, h: McpHome) {
  for (const i of await mine(incus, h)) await removeInstance(incus, i.name);
}

Deno.test({
  name: "a keyed delegate with template finds its first attempt across sessions",
  ignore: !HAVE,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    // the same template, air-gapped (network is not part of the definition hash)
    const def = BUILTIN_TEMPLATES[AGENTS_TEMPLATE];
    assert.ok(def, "the built-in definition is readable");
    Deno.mkdirSync(`${h.configDir}/templates`, { recursive: true });
    Deno.writeTextFileSync(
      `${h.configDir}/templates/${AGENTS_TEMPLATE}.yaml`,
      `${def}network: airgap\n`,
    );
    const key = `dk-${crypto.randomUUID().slice(0, 8)}`;
    const ask = { template: AGENTS_TEMPLATE, instruction: "Say hello", idempotency_key: key };
    let first = { task_id: "", instance: "" };
    const underKey = async () =>
      (await mine(incus, h)).filter((i) => readStamps(i.config)["mcp-idempotency-key"] === key);
    try {
      await t.step("first session: a concurrent repeat is busy, a later one replays", async () => {
        const a = await connect(h, "legacy", { extra: ["--no-preflight"] });
        const [r1, r2] = await Promise.all([
          call(a, "delegate", ask),
          new Promise((r) => setTimeout(r, 300)).then(() => call(a, "delegate", ask)),
        ]);
        assert.equal(refusal(r1), undefined, text(r1));
        assert.equal(refusal(r2), "busy", text(r2));
        first = { task_id: String(sc(r1).task_id), instance: String(sc(r1).instance) };
        assert.equal(sc(r1).replayed, undefined);
        const again = sc(await call(a, "delegate", ask));
        assert.deepEqual([again.task_id, again.instance, again.replayed], [
          first.task_id,
          first.instance,
          true,
        ]);
        const other = await call(a, "delegate", { ...ask, template: "tpl-dev" });
        assert.equal(refusal(other), "invalid_argument", text(other));
        Deno.kill(serverPid(a), "SIGKILL");
        await a.close().catch(() => {});
      });

      await t.step("after SIGKILL: a new session replays the same task", async () => {
        const b = await connect(h, "legacy", { extra: ["--no-preflight"] });
        try {
          const other = await call(b, "delegate", { ...ask, template: "tpl-dev" });
          assert.equal(refusal(other), "invalid_argument", text(other));
          const r = await call(b, "delegate", ask);
          assert.equal(refusal(r), undefined, text(r));
          assert.deepEqual([sc(r).task_id, sc(r).instance, sc(r).replayed], [
            first.task_id,
            first.instance,
            true,
          ]);
          assert.equal(sc(r).agent, "claude");
          // the task is this session's now: task_status reads it
          const st = await call(b, "task_status", { task_id: first.task_id });
          assert.equal(refusal(st), undefined, text(st));
          assert.deepEqual((await underKey()).map((i) => i.name), [first.instance]);
        } finally {
          await b.close(); // a clean exit: the instance is stamped orphaned
        }
        const st = readStamps((await incus.getInstance(first.instance)).value.config);
        assert.match(st["mcp-orphaned"] ?? "", / /, "released as an orphan");
      });

      await t.step("after a clean exit: a new session replays it too", async () => {
        const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
        try {
          const r = await call(c, "delegate", ask);
          assert.equal(refusal(r), undefined, text(r));
          assert.deepEqual([sc(r).task_id, sc(r).instance, sc(r).replayed], [
            first.task_id,
            first.instance,
            true,
          ]);
          assert.deepEqual((await underKey()).map((i) => i.name), [first.instance]);
          assert.equal((await mine(incus, h)).length, 1, "exactly one instance was made");
          assert.deepEqual(await taskDirs(incus, first.instance), [first.task_id]);
          const d = await call(c, "destroy_instance", { instance: first.instance });
          assert.equal(refusal(d), undefined, text(d));
        } finally {
          await c.close();
        }
      });
    } finally {
      await cleanup(incus, h);
      incus.close();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "two delegations to one instance at the same moment: exactly one agent starts",
  ignore: !HAVE,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    const a = await connect(h, "legacy", { extra: ["--no-preflight"] });
    let b: Client | undefined;
    let lab: AgentsLab | undefined;
    try {
      const made = await call(a, "create_instance", { template: AGENTS_TEMPLATE });
      assert.equal(refusal(made), undefined, text(made));
      const instance = String(sc(made).instance);
      lab = await AgentsLab.open({ instance });
      await lab.pushLoginEnv();
      // the agent's model calls are slow: it is still running while the others try
      for (let i = 0; i < 6; i++) lab.anthropic.queue({ delayMs: 3000 });
      const go = { instance, agent: "claude", cwd: PROJECT, instruction: "MOCK_SLOW" };
      let running = "";

      await t.step("one session, two calls at once: one starts, one wrong_state", async () => {
        const rs = await Promise.all([call(a, "delegate", go), call(a, "delegate", go)]);
        const ok = rs.filter((r) => !refusal(r));
        const no = rs.filter((r) => refusal(r));
        assert.equal(ok.length, 1, rs.map(text).join(" / "));
        assert.equal(refusal(no[0]!), "wrong_state", text(no[0]!));
        running = String(sc(ok[0]!).task_id);
        assert.deepEqual(await taskDirs(incus, instance), [running], "the refused made nothing");
      });

      await t.step("a second session that took the instance over is refused too", async () => {
        b = await connect(h, "legacy", { extra: ["--no-preflight"] });
        const took = await call(b, "adopt_instance", { instance, force: true });
        assert.equal(refusal(took), undefined, text(took));
        assert.deepEqual(sc(took).tasks, [running]);
        const rs = await Promise.all([call(b, "delegate", go), call(a, "delegate", go)]);
        assert.equal(refusal(rs[0]!), "wrong_state", text(rs[0]!));
        assert.match(text(rs[0]!), new RegExp(running));
        assert.equal(refusal(rs[1]!), "not_held", text(rs[1]!));
        assert.deepEqual(await taskDirs(incus, instance), [running], "nothing half-made");
        const c = await call(b, "cancel_task", { task_id: running });
        assert.equal(refusal(c), undefined, text(c));
        lab!.anthropic.clearQueue();
      });
    } finally {
      await b?.close();
      await a.close();
      await lab?.[Symbol.asyncDispose]();
      await cleanup(incus, h);
      incus.close();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});
