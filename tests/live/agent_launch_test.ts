/**
 * One agent at a time per instance, decided in the guest (§2.6): two agent launches fired at
 * the same moment at one real container (as two sessions would, each unaware of the other)
 * start exactly one run; the other is refused with the running task's id and leaves no task
 * directory. A command task never counts, an agent run that finished frees the instance, and
 * the next run of a finished agent task (send_message) starts while the instance is free.
 */

import assert from "node:assert/strict";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { createTaskEngine } from "../../mcp/tasks/mod.ts";
import {
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sh(incus: IncusClient, name: string, script: string) {
  const r = await incus.execCapture(name, ["bash", "-c", script]);
  const dec = new TextDecoder();
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test({
  name: "two agent launches at one instance at the same moment: exactly one starts",
  ignore: NO_INCUS,
  async fn(t) {
    const name = testName("agentlock");
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const engine = createTaskEngine({ incus });
    const tag = crypto.randomUUID().slice(0, 4).replace(/[^a-z0-9]/g, "a");
    const id = (n: number) => `t${n}-${tag}`;
    // an agent run that waits for its go file (the run script is the caller's bash)
    const waiting = (go: string) => `until [ -e /tmp/${go} ]; do sleep 0.1; done\n`;
    const agent = (n: number, run = 1) =>
      engine.launch(name, {
        taskId: id(n),
        run,
        kind: "agent",
        script: waiting(`go-${n}-${run}`),
        prompt: "p\n",
      });
    const dirs = async () =>
      (await sh(incus, name, "ls /home/agentuser/.isx-mcp/tasks")).out.split("\n").filter(Boolean)
        .sort();
    const untilDone = async (taskId: string) => {
      for (let i = 0; i < 100; i++) {
        if ((await engine.probe(name, [taskId])).get(taskId) === "done") return;
        await sleep(200);
      }
      throw new Error(`${taskId} still running after 20 s`);
    };
    try {
      await incus.createInstance({
        name,
        type: "container",
        source: { type: "image", alias: LIVE_IMAGE },
        start: true,
      }, { step: `create instance ${name}` });
      const ready = await sh(
        incus,
        name,
        "for i in $(seq 100); do [ -S /run/systemd/private ] && break; sleep 0.2; done; " +
          "useradd -m -s /bin/bash agentuser && [ -S /run/systemd/private ]",
      );
      assert.equal(ready.code, 0, ready.err);

      await t.step("a command task does not hold the instance", async () => {
        await engine.startCommand(name, { taskId: id(9), command: "sleep 600" });
      });

      await t.step("of two launches at the same moment, one starts", async () => {
        const out = await Promise.allSettled([agent(1), agent(2)]);
        const ok = out.filter((o) => o.status === "fulfilled");
        const no = out.filter((o) => o.status === "rejected") as PromiseRejectedResult[];
        assert.equal(ok.length, 1, JSON.stringify(out));
        const won = (ok[0] as PromiseFulfilledResult<{ task_id: string }>).value.task_id;
        const lost = won === id(1) ? id(2) : id(1);
        const e = no[0]!.reason;
        assert.ok(e instanceof IsbError && e.data?.agent_busy === won, String(e));
        assert.deepEqual(await dirs(), [won, id(9)].sort(), "the refused launch made nothing");
        assert.equal((await engine.probe(name, [won])).get(won), "running");
        // a third, later, is refused too; the winner's end frees the instance
        await assert.rejects(agent(3), (x: unknown) => x instanceof IsbError && !!x.data);
        assert.equal((await sh(incus, name, `touch /tmp/go-${won.slice(1, 2)}-1`)).code, 0);
        await untilDone(won);
        await agent(Number(lost.slice(1, 2)));
        assert.equal((await sh(incus, name, `touch /tmp/go-${lost.slice(1, 2)}-1`)).code, 0);
        await untilDone(lost);
      });

      await t.step("the next run of a finished agent task starts on a free instance", async () => {
        await agent(1, 2);
        await assert.rejects(agent(4), (x: unknown) => x instanceof IsbError && !!x.data);
        assert.equal((await sh(incus, name, "touch /tmp/go-1-2")).code, 0);
        await untilDone(id(1));
      });
    } finally {
      await removeInstance(incus, name);
      incus.close();
    }
  },
});
