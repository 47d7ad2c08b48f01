/**
 * `isx mcp` with a stateless 2026-07-28 client (the TypeScript SDK pinned to that revision)
 * on real Incus: the seed-000 flow with task changes through `subscriptions/listen`, a client
 * that did not subscribe is never polled (execs counted from Incus's own operation events),
 * and MCP tasks on the raw wire in both eras (a task-augmented `tools/call`, then
 * `tasks/get`, `tasks/result`, `tasks/list`).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import {
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  until as poll,
} from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { call, checkResult, connect, makeHome, mcpCommand, refusal } from "../helpers/mcp.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
/** No proxy runs in these tests (its port is 9): the preflight is skipped, as isx branch --no-preflight. */
const NP = ["--no-preflight"];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

type Change = {
  task_id: string;
  state: string;
  exit_code?: number;
  _meta?: Record<string, unknown>;
};

/** Counts exec operations Incus starts on `name` while it runs. */
async function execCounter(incus: IncusClient, name: string) {
  const stream = await incus.events({ types: ["operation"] });
  const ids = new Set<string>();
  const loop = (async () => {
    for await (const e of stream) {
      const m = e.metadata as {
        id?: string;
        description?: string;
        resources?: { instances?: string[] };
      };
      if (
        m.description === "Executing command" &&
        (m.resources?.instances ?? []).some((u) => u.endsWith(`/instances/${name}`)) && m.id
      ) ids.add(m.id);
    }
  })();
  return {
    count: () => ids.size,
    async close() {
      stream.close();
      await loop.catch(() => {});
    },
  };
}

const until = <T>(what: string, f: () => T | undefined, ms: number) => poll(what, f, ms, 200);

Deno.test({
  name:
    "a stateless client: discover, keyed create, subscriptions/listen delivers task changes, unsubscribed is never polled",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    let client: Client | undefined;
    try {
      client = await connect(h, "modern", { extra: NP });
      const c = client;
      const changes: Change[] = [];
      c.fallbackNotificationHandler = (n) => {
        if (n.method === "notifications/isx/task_changed") changes.push(n.params as Change);
        return Promise.resolve();
      };
      assert.equal(c.getServerVersion()?.name, "isx");
      const key = `modern-${crypto.randomUUID().slice(0, 8)}`;
      const made = sc(
        await call(c, "create_instance", {
          template: TEMPLATE,
          name_hint: "modern",
          idempotency_key: key,
        }),
      );
      const name = String(made.instance);
      await t.step("an unsubscribed client's running task is never probed", async () => {
        const counter = await execCounter(incus, name);
        try {
          const bg = sc(
            await call(c, "exec", { instance: name, command: "sleep 8", background: true }),
          );
          assert.ok(bg.task_id);
          const before = counter.count(); // the launch itself
          await sleep(6000);
          assert.equal(counter.count(), before, "no exec while nobody listens");
          await call(c, "cancel_task", { task_id: String(bg.task_id) });
        } finally {
          await counter.close();
        }
      });
      await t.step(
        "subscriptions/listen with an instance filter brings running then finished",
        async () => {
          const sub = await c.listen(
            { "dev.incusspawn/taskChanged": { instances: [name] } } as never,
          );
          try {
            const bg = sc(
              await call(c, "exec", {
                instance: name,
                command: "sleep 1; exit 4",
                background: true,
              }),
            );
            const id = String(bg.task_id);
            const fin = await until(
              "finished",
              () => changes.find((x) => x.task_id === id && x.state === "finished"),
              30_000,
            );
            assert.equal(fin.exit_code, 4);
            assert.deepEqual(
              changes.filter((x) => x.task_id === id).map((x) => x.state),
              ["running", "finished"],
            );
            assert.ok(fin._meta?.["io.modelcontextprotocol/subscriptionId"] !== undefined);
          } finally {
            await sub.close();
          }
        },
      );
      await t.step("a repeat of the keyed create answers replayed", async () => {
        const again = sc(
          await call(c, "create_instance", { template: TEMPLATE, idempotency_key: key }),
        );
        assert.deepEqual([again.instance, again.replayed], [name, true]);
      });
      await t.step("destroy_instance", async () => {
        assert.equal(sc(await call(c, "destroy_instance", { instance: name })).already, false);
        assert.equal(
          refusal(await call(c, "exec", { instance: name, command: "true" })),
          "not_found",
        );
      });
    } finally {
      await client?.close();
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-cwd"] === h.dir) await removeInstance(incus, i.name);
      }
      incus.close();
    }
  },
});

Deno.test({
  name:
    "MCP tasks on the wire: a handshake task (tasks/get, tasks/result, tasks/list) and a 2026 tasks-extension task (resultType task, tasks/get with the result)",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    const { env } = mcpCommand(h);
    const p = spawnProgram(["mcp", ...NP], { env, prog: "isx", cwd: h.dir });
    let n = 0;
    const rpc = async (method: string, params: Record<string, unknown>) => {
      const id = ++n;
      await p.send({ jsonrpc: "2.0", id, method, params });
      for (;;) {
        const m = await p.readJson(300_000);
        if (m.id === id) return m;
      }
    };
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {
        extensions: { "io.modelcontextprotocol/tasks": {} },
      },
    };
    try {
      const made = await rpc("tools/call", {
        name: "create_instance",
        arguments: { template: TEMPLATE, name_hint: "mcptask" },
        task: { ttl: 60_000 },
      });
      const handle =
        (made.result as { task: { taskId: string; status: string; ttl: number } }).task;
      assert.equal(handle.status, "working");
      assert.equal(handle.ttl, 60_000);
      const listed = (await rpc("tasks/list", {})).result as { tasks: { taskId: string }[] };
      assert.ok(listed.tasks.some((x) => x.taskId === handle.taskId));
      const res = (await rpc("tasks/result", { taskId: handle.taskId })).result as Record<
        string,
        unknown
      >;
      checkResult("create_instance", res);
      assert.equal(
        (res._meta as Record<string, { taskId: string }>)["io.modelcontextprotocol/related-task"]!
          .taskId,
        handle.taskId,
      );
      const name = String(sc(res).instance);
      const got = (await rpc("tasks/get", { taskId: handle.taskId })).result as { status: string };
      assert.equal(got.status, "completed");
      // the stateless era: offered by the request's own capabilities, answered resultType task
      const t = (await rpc("tools/call", {
        name: "exec",
        arguments: { instance: name, command: "echo via-task" },
        _meta: meta,
      })).result as Record<string, unknown>;
      assert.equal(t.resultType, "task");
      assert.equal(typeof t.ttlMs, "number");
      let st: Record<string, unknown> = t;
      for (let i = 0; i < 150 && st.status === "working"; i++) {
        await sleep(200);
        st = (await rpc("tasks/get", { taskId: t.taskId, _meta: meta })).result as Record<
          string,
          unknown
        >;
      }
      assert.equal(st.status, "completed");
      assert.equal(st.resultType, "complete");
      checkResult("exec", st.result as Record<string, unknown>);
      assert.equal(sc(st.result as Record<string, unknown>).stdout, "via-task\n");
      // without the extension in this request's capabilities, the same call is answered in place
      const plain = (await rpc("tools/call", {
        name: "exec",
        arguments: { instance: name, command: "true" },
        _meta: { ...meta, "io.modelcontextprotocol/clientCapabilities": {} },
      })).result as Record<string, unknown>;
      assert.equal(plain.resultType, "complete");
      assert.equal(sc(plain).exit_code, 0);
    } finally {
      await p[Symbol.asyncDispose]();
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-cwd"] === h.dir) await removeInstance(incus, i.name);
      }
      incus.close();
    }
  },
});
