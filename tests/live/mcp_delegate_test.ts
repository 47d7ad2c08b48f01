/**
 * Delegation end to end: the SDK client over stdio against the real `isx mcp`, an instance it
 * created from `tpl-agents` on real Incus, the real agent CLIs in it talking through the real
 * proxy (the agents lab's, in this process) to the scripted model mocks on the host. Per
 * agent: `delegate` makes the agent write a file with its own tool, a second delegation to the
 * busy instance is refused `wrong_state`, `task_result` has the report and figures, `get_diff`
 * shows the file, `send_message` continues the same session (the mock sees the earlier turns),
 * the proxy put the real key on every call. Plus `max_turns` refused, `cancel_task` mid-turn
 * leaves nothing running, and no real credential on the guest. Needs the built template; without
 * it the test is ignored with a printed reason.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import { LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, removeInstance } from "../helpers/live.ts";
import {
  call,
  checkResult,
  connect,
  makeHome,
  mcpCommand,
  refusal,
  settle,
  templateEntry,
} from "../helpers/mcp.ts";
import { spawnProgram } from "../helpers/spawn.ts";
import {
  AGENTS_TEMPLATE,
  AgentsLab,
  ensureTemplate,
  PROJECT,
  REAL,
} from "../helpers/agents_lab.ts";

// every agent by default (about 20 s more than two; nothing skipped in CI);
// ISX_TEST_DELEGATE_AGENTS=claude,codex narrows the per-agent steps by hand
const AGENTS = (Deno.env.get("ISX_TEST_DELEGATE_AGENTS") || "claude,codex,pi,opencode").split(",");
const WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
const HAVE = !NO_INCUS && WANTED && await ensureTemplate().then(() => true); // built in this run's lab
if (!NO_INCUS && WANTED && !HAVE) {
  // deno-lint-ignore no-console
  console.error(`delegate live tests skipped: no ${AGENTS_TEMPLATE} (isx build tpl-agents)`);
}
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;

Deno.test({
  name: "isx mcp delegates to real agents: write, report, diff, continue, cancel",
  ignore: !HAVE,
  async fn(t) {
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
    let lab: AgentsLab | undefined;
    let instance = "";
    try {
      const tpl = await templateEntry(c, AGENTS_TEMPLATE);
      assert.equal(tpl.supports_delegate, true);
      assert.equal(tpl.default_delegate_agent, "claude");
      const agents = tpl.delegate_agents as Record<string, unknown>[];
      assert.deepEqual(agents.map((a) => a.agent), ["claude", "codex", "pi", "opencode"]);
      assert.deepEqual(agents.find((a) => a.agent === "codex")!.approval_policy, "never");

      const made = await call(c, "create_instance", {
        template: AGENTS_TEMPLATE,
        purpose: "delegate live test",
      });
      assert.equal(refusal(made), undefined, text(made));
      instance = String(sc(made).instance);
      assert.equal(sc(made).supports_delegate, true);
      // the lab points the agents at its proxy and mocks (test names, its CA, placeholders)
      lab = await AgentsLab.open({ instance });
      // runs start in a login shell (su -): the profile carries the lab's endpoints
      await lab.pushLoginEnv();

      await t.step("max_turns is refused invalid_argument", async () => {
        const r = await call(c, "delegate", { instance, instruction: "x", max_turns: 3 });
        assert.equal(refusal(r), "invalid_argument");
        const bad = await call(c, "delegate", {
          instance,
          instruction: "x",
          agent: "claude",
          cwd: "/nope",
        });
        assert.equal(refusal(bad), "invalid_argument", text(bad));
      });

      await t.step("a fresh instance whose delegation cannot start is removed", async () => {
        const names = async () =>
          ((sc(await call(c, "list_instances")).instances ?? []) as Record<string, unknown>[])
            .map((i) => String(i.instance)).sort();
        const before = await names();
        const r = await call(c, "delegate", {
          template: AGENTS_TEMPLATE,
          instruction: "x",
          cwd: "/no/such/dir",
          purpose: "doomed",
        });
        assert.equal(refusal(r), "invalid_argument", text(r));
        assert.deepEqual(await names(), before, "no instance was left behind");
        const all = await lab!.incus.listInstances();
        assert.ok(!all.some((i) => i.name.startsWith("mcp-agents-task-")), "none in Incus either");
      });

      for (const agent of AGENTS) {
        const mock = agent === "codex" ? lab.openai : lab.anthropic;
        const out = `${PROJECT}/out-${agent}.txt`;
        let task = "";
        await t.step(
          `${agent}: delegate writes a file; a second delegation is wrong_state`,
          async () => {
            const before = mock.modelCalls().length;
            const r = await call(c, "delegate", {
              instance,
              agent,
              cwd: PROJECT,
              instruction: `Please do this. MOCK_WRITE_FILE ${out} hello-${agent}`,
              idempotency_key: `live-${agent}`,
            });
            assert.equal(refusal(r), undefined, text(r));
            const d = sc(r);
            task = String(d.task_id);
            const same = sc(
              await call(c, "delegate", {
                instance,
                agent,
                instruction: "repeated",
                idempotency_key: `live-${agent}`,
              }),
            );
            assert.equal(same.task_id, task, "a keyed repeat returns the same task");
            assert.equal(same.replayed, true);
            assert.equal(d.kind, "agent");
            assert.equal(d.run, 1);
            assert.equal(d.agent, agent);
            const again = await call(c, "delegate", { instance, instruction: "another" });
            assert.equal(refusal(again), "wrong_state", text(again));
            const st = await settle(c, task);
            assert.equal(st.state, "finished", JSON.stringify(st));
            assert.equal(st.agent, agent);
            assert.ok((st.assistant_messages as number) >= 1, JSON.stringify(st));
            assert.ok((st.recent as string[]).length >= 1, "task_status shows the activities");
            assert.equal(st.stdout_tail, undefined, "not the raw events");
            const res = await call(c, "task_result", { task_id: task, events: true });
            assert.equal(refusal(res), undefined, text(res));
            const rr = sc(res);
            assert.equal(rr.outcome, "success", JSON.stringify(rr));
            assert.equal(rr.exit_code, 0);
            assert.match(String(rr.report), /^MOCK_DONE: /);
            assert.ok((rr.recent as string[]).some((x) => x.startsWith("ran ")), "a tool was used");
            if (agent !== "codex") assert.equal(rr.turns, 2);
            assert.ok(((rr.tokens as Record<string, number>).output_tokens ?? 0) > 0);
            assert.ok(mock.modelCalls().length > before, `${agent} called the model`);
            for (const m of mock.modelCalls().slice(before)) {
              const cred = agent === "codex" ? m.headers["authorization"] : m.headers["x-api-key"];
              assert.equal(cred, agent === "codex" ? `Bearer ${REAL.openai}` : REAL.anthropic);
            }
          },
        );
        await t.step(`${agent}: get_diff shows the file`, async () => {
          const r = await call(c, "get_diff", { task_id: task });
          assert.equal(refusal(r), undefined, text(r));
          const d = sc(r) as {
            repos: { repo: string; files: Record<string, unknown>[] }[];
            patch?: string;
          };
          assert.equal(d.repos[0]!.repo, PROJECT);
          assert.deepEqual(d.repos[0]!.files.find((f) => f.path === `out-${agent}.txt`), {
            path: `out-${agent}.txt`,
            added: 1,
            deleted: 0,
          });
          assert.match(d.patch ?? "", new RegExp(`\\+hello-${agent}`));
          const stat = sc(await call(c, "get_diff", { task_id: task, stat: true }));
          assert.equal(stat.patch, undefined);
        });
        await t.step(`${agent}: send_message continues the same session`, async () => {
          const r = await call(c, "send_message", {
            task_id: task,
            message: "Second message: MOCK_CHECK",
          });
          assert.equal(refusal(r), undefined, text(r));
          assert.equal(sc(r).run, 2);
          const st = await settle(c, task);
          assert.equal(st.state, "finished");
          assert.equal(st.run, 2);
          const rr = sc(await call(c, "task_result", { task_id: task }));
          const n = Number(/MOCK_REPLY n=(\d+)/.exec(String(rr.report))?.[1]);
          assert.ok(n >= 3, `the resumed request held the earlier turns: ${rr.report}`);
          assert.ok(mock.modelCalls().at(-1)!.body.includes(`MOCK_WRITE_FILE ${out}`));
        });
      }

      await t.step({
        name: "claude: a named model is checked with one turn first, then kept",
        ignore: !AGENTS.includes("claude"),
        fn: async () => {
          const mock = lab!.anthropic;
          const before = mock.modelCalls().length;
          const r = await call(c, "delegate", {
            instance,
            agent: "claude",
            cwd: PROJECT,
            model: "claude-haiku-4-5",
            instruction: "Say hello",
          });
          assert.equal(refusal(r), undefined, text(r));
          assert.equal(sc(r).model, "claude-haiku-4-5");
          const task = String(sc(r).task_id);
          assert.equal((await settle(c, task)).exit_code, 0);
          const calls = mock.modelCalls().slice(before);
          assert.ok(
            calls[0]!.body.includes("Reply with the single word OK"),
            "the check came first",
          );
          assert.ok(calls.every((m) => m.json?.model === "claude-haiku-4-5"), "the model was used");
          const n = mock.modelCalls().length;
          const again = await call(c, "send_message", { task_id: task, message: "More" });
          assert.equal(sc(again).model, "claude-haiku-4-5", "the override persists");
          await settle(c, task);
          assert.ok(
            mock.modelCalls().slice(n).every((m) => m.json?.model === "claude-haiku-4-5"),
            "run 2 kept the model",
          );
        },
      });

      await t.step("cancel_task mid-turn leaves nothing of the task running", async () => {
        const mock = lab!.anthropic;
        const before = mock.modelCalls().length;
        for (let i = 0; i < 3; i++) mock.queue({ delayMs: 3000 });
        const r = await call(c, "delegate", {
          instance,
          agent: "claude",
          cwd: PROJECT,
          instruction: "MOCK_SLOW",
        });
        assert.equal(refusal(r), undefined, text(r));
        const task = String(sc(r).task_id);
        const end = Date.now() + 120_000;
        while (mock.modelCalls().length === before && Date.now() < end) {
          await new Promise((r) => setTimeout(r, 200));
        }
        assert.ok(mock.modelCalls().length > before, "the agent was in a model call");
        await call(c, "cancel_task", { task_id: task });
        mock.clearQueue();
        const st = await settle(c, task);
        assert.equal(st.state, "finished");
        assert.equal(st.exit_code, 143);
        assert.deepEqual(await lab!.taskProcesses(task), [], "nothing of the task runs");
      });

      await t.step({
        name: "pi: send_message before Pi saved its session is wrong_state",
        ignore: !AGENTS.includes("pi"),
        fn: async () => {
          const mock = lab!.anthropic;
          const before = mock.modelCalls().length;
          for (let i = 0; i < 3; i++) mock.queue({ delayMs: 3000 });
          const r = await call(c, "delegate", {
            instance,
            agent: "pi",
            cwd: PROJECT,
            instruction: "MOCK_SLOW",
          });
          assert.equal(refusal(r), undefined, text(r));
          const task = String(sc(r).task_id);
          const end = Date.now() + 120_000;
          while (mock.modelCalls().length === before && Date.now() < end) {
            await new Promise((r) => setTimeout(r, 200));
          }
          await call(c, "cancel_task", { task_id: task });
          mock.clearQueue();
          assert.equal((await settle(c, task)).state, "finished");
          const again = await call(c, "send_message", { task_id: task, message: "Continue" });
          assert.equal(refusal(again), "wrong_state", text(again));
          assert.match(text(again), /Pi/);
        },
      });

      await t.step("no real credential is on the guest's disk or in its processes", async () => {
        const r = await lab!.root(
          `grep -rIl -e '${REAL.anthropic}' -e '${REAL.openai}' /home /root /etc /tmp /opt /run 2>/dev/null; ` +
            `cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e '${REAL.anthropic}' -e '${REAL.openai}' || true`,
        );
        assert.equal(r.trim(), "0", r);
      });
    } finally {
      if (instance) await call(c, "destroy_instance", { instance }).catch(() => {});
      await c.close();
      await lab?.[Symbol.asyncDispose]();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "delegate as an MCP task on the wire: tasks/result gives the started agent task",
  ignore: !HAVE,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    const { env } = mcpCommand(h);
    const p = spawnProgram(["mcp", "--no-preflight"], { env, prog: "isx", cwd: h.dir });
    let n = 0;
    const rpc = async (method: string, params: Record<string, unknown>) => {
      const id = ++n;
      await p.send({ jsonrpc: "2.0", id, method, params });
      for (;;) {
        const m = await p.readJson(300_000);
        if (m.id === id) return m.result as Record<string, unknown>;
      }
    };
    try {
      const made = await rpc("tools/call", {
        name: "create_instance",
        arguments: { template: AGENTS_TEMPLATE, name_hint: "deltask" },
      });
      const instance = String(sc(made).instance);
      const r = await rpc("tools/call", {
        name: "delegate",
        arguments: { instance, instruction: "MOCK_SLOW" },
        task: { ttl: 60_000 },
      });
      const handle = (r as { task: { taskId: string; status: string } }).task;
      assert.ok(handle?.taskId, JSON.stringify(r));
      const res = await rpc("tasks/result", { taskId: handle.taskId });
      checkResult("delegate", res);
      assert.equal(refusal(res), undefined, text(res));
      const d = sc(res);
      assert.equal(d.kind, "agent");
      assert.equal(d.agent, "claude", "the default agent");
      const c = await rpc("tools/call", { name: "cancel_task", arguments: { task_id: d.task_id } });
      assert.equal(refusal(c), undefined, text(c));
    } finally {
      await p[Symbol.asyncDispose]();
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-cwd"] === h.dir) await removeInstance(incus, i.name);
      }
      incus.close();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});
