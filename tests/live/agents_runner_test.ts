/**
 * The four agent runners with the real agent CLIs in a real container (a copy of
 * `tpl-agents`), through the real proxy, against the scripted model mocks on the host: the
 * agent writes a file with its own tool, the translated result carries the report and the
 * figures the agent reports, a second run resumes the same session (the mock sees the
 * earlier turns), and no real credential reaches the guest. Plus opencode's gone-session rule
 * and Pi's not-yet-saved session; a TERM mid-turn; get_diff of what each agent wrote. Builds
 * the template first when the machine has none (`isx build tpl-agents`, docs/templates.md).
 */

import assert from "node:assert/strict";
import { NO_INCUS } from "../helpers/live.ts";
import type { AgentEvent, AgentName, ResultEvent } from "../../guest/mod.ts";
import { AgentsLab, ensureTemplate, type LabRun, PROJECT, REAL } from "../helpers/agents_lab.ts";
import { MOCK_USAGE } from "../fakes/mock_model.ts";

// ISX_TEST_RUNNER_AGENTS=codex,pi narrows the per-agent steps (while working on one agent)
const ONLY = (Deno.env.get("ISX_TEST_RUNNER_AGENTS") || "claude,codex,pi,opencode").split(
  ",",
) as AgentName[];
// The agents come from npm through the host; a host without the registry opts out with
// ISX_TEST_AGENTS=0 (the test is then reported ignored, never passed).
const WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
if (!NO_INCUS && !WANTED) {
  // deno-lint-ignore no-console
  console.error("agent runner live tests skipped: ISX_TEST_AGENTS=0");
}

function result(r: LabRun): ResultEvent {
  const res = r.events.filter((e): e is ResultEvent => e.type === "result");
  assert.equal(res.length, 1, `one result event: ${r.output}\n${JSON.stringify(r.events)}`);
  assert.equal(r.events.at(-1)!.type, "result", "the result comes last");
  return res[0]!;
}

function texts(evs: AgentEvent[]): string[] {
  return evs.flatMap((e) =>
    e.type === "assistant"
      ? e.message.content.flatMap((b) => b.type === "text" ? [b.text] : [])
      : []
  );
}

function tools(evs: AgentEvent[]): string[] {
  return evs.flatMap((e) =>
    e.type === "assistant"
      ? e.message.content.flatMap((b) => b.type === "tool_use" ? [b.name] : [])
      : []
  );
}

/** The credential headers a mock saw carry the real key; no body carries it or a placeholder. */
function assertInjected(lab: AgentsLab, agent: AgentName, from: number) {
  const mock = agent === "codex" ? lab.openai : lab.anthropic;
  const calls = mock.modelCalls().slice(from);
  assert.ok(calls.length >= 1, `${agent} made model calls`);
  for (const c of calls) {
    const cred = agent === "codex" ? c.headers["authorization"] : c.headers["x-api-key"];
    const real = agent === "codex" ? `Bearer ${REAL.openai}` : REAL.anthropic;
    assert.equal(cred, real, `${agent}: the proxy put the real key on the ${c.via} call`);
    assert.ok(!c.body.includes(REAL.anthropic) && !c.body.includes(REAL.openai));
  }
}

/** The model override each task asks for (opencode's bare id gets its config's provider). */
const MODEL: Record<AgentName, string> = {
  claude: "claude-haiku-4-5",
  codex: "gpt-5.4",
  pi: "claude-haiku-4-5",
  opencode: "claude-haiku-4-5",
};

const FIGURES: Record<AgentName, (r: ResultEvent) => void> = {
  claude(r) {
    assert.equal(r.num_turns, 2);
    assert.ok((r.total_cost_usd ?? 0) > 0, "claude prices its own calls");
    assert.equal(r.usage?.output_tokens, 2 * MOCK_USAGE.output);
  },
  codex(r) {
    assert.equal(r.num_turns, undefined, "codex reports no turns");
    assert.equal(r.total_cost_usd, undefined, "codex reports no cost");
    assert.equal(r.usage?.cache_read_input_tokens, 2 * MOCK_USAGE.cacheRead);
    assert.equal(r.usage?.input_tokens, 2 * MOCK_USAGE.input);
    assert.equal(r.usage?.output_tokens, 2 * MOCK_USAGE.output);
  },
  pi(r) {
    assert.equal(r.num_turns, 2);
    assert.equal(r.usage?.input_tokens, 2 * MOCK_USAGE.input);
    assert.equal(r.usage?.cache_read_input_tokens, 2 * MOCK_USAGE.cacheRead);
    assert.ok((r.total_cost_usd ?? 0) > 0, "pi prices its own calls");
  },
  opencode(r) {
    assert.equal(r.num_turns, 2);
    assert.equal(r.usage?.output_tokens, 2 * MOCK_USAGE.output);
    assert.ok((r.total_cost_usd ?? 0) > 0, "opencode prices its own calls");
  },
};

Deno.test({
  name: "agent runners: each agent writes a file, reports, and resumes its session",
  ignore: NO_INCUS || !WANTED,
  async fn(t) {
    // built once per machine when missing (several minutes cold), then copied by every run
    await ensureTemplate();
    await using lab = await AgentsLab.open();
    for (const agent of ONLY) {
      const task = `t1-${agent}`;
      const out = `${PROJECT}/out-${agent}.txt`;
      await t.step(`${agent}: run 1 writes ${out} with its own tool and reports`, async () => {
        const mock = agent === "codex" ? lab.openai : lab.anthropic;
        const before = mock.modelCalls().length;
        await lab.prepare(task, 1, `Please do this. MOCK_WRITE_FILE ${out} hello-${agent}\n`, {
          "brief.md": "You are a delegate of a coordinator on the host.\n",
          model: `${MODEL[agent]}\n`, // the task's model override
        });
        const r = await lab.run(agent, task, 1);
        const res = result(r);
        assert.equal(res.is_error, false, `${res.result}\n${r.output}`);
        assert.equal(r.code, 0);
        assert.equal(r.exit, "0");
        assert.match(res.result, /^MOCK_DONE: /);
        assert.ok(tools(r.events).length >= 1, `${agent} used a tool`);
        const file = await lab.user(`cat ${out}`);
        assert.equal(file.stdout, `hello-${agent}\n`);
        assert.ok(r.session, "the session is recorded");
        assert.equal(res.session_id, r.session);
        FIGURES[agent](res);
        assertInjected(lab, agent, before);
        const diff = await lab.diff(task);
        assert.equal(diff.repos.length, 1);
        assert.equal(diff.repos[0]!.repo, PROJECT);
        assert.deepEqual(
          diff.repos[0]!.files.find((f) => f.path === `out-${agent}.txt`),
          { path: `out-${agent}.txt`, added: 1, deleted: 0 },
          "get_diff shows the file the agent wrote",
        );
        assert.match(diff.patch ?? "", new RegExp(`\\+hello-${agent}`));
        const status = await lab.user(
          `cd ${PROJECT} && git status --porcelain && git diff --cached`,
        );
        assert.ok(!status.stdout.includes("A "), "the repository's own index is untouched");
        if (agent === "codex") {
          assert.ok(
            mock.modelCalls().slice(before).every((c) => c.via === "websocket"),
            "codex spoke the Responses API over a WebSocket through the proxy",
          );
        }
        const wanted = MODEL[agent].replace(/^anthropic\//, "");
        assert.ok(
          mock.modelCalls().slice(before).every((c) => c.json?.model === wanted),
          `${agent} asked for the override ${wanted}: ${
            mock.modelCalls().slice(before).map((c) => c.json?.model)
          }`,
        );
        assert.ok(
          mock.modelCalls().slice(before).some((c) => c.body.includes("You are a delegate")),
          `${agent}: the brief reached the model: ${
            mock.modelCalls().slice(before).map((c) => c.via + " " + c.body.slice(0, 3000)).join(
              "\n",
            )
          }`,
        );
      });
      await t.step(`${agent}: run 2 resumes the session with the earlier turns`, async () => {
        const mock = agent === "codex" ? lab.openai : lab.anthropic;
        const before = mock.modelCalls().length;
        const first = (await lab.files(task, 1)).session;
        await lab.prepare(task, 2, "Second message: MOCK_CHECK\n");
        const r = await lab.run(agent, task, 2);
        const res = result(r);
        assert.equal(res.is_error, false, `${res.result}\n${r.output}`);
        assert.equal(r.exit, "0");
        const n = Number(/MOCK_REPLY n=(\d+)/.exec(res.result)?.[1]);
        assert.ok(n >= 3, `the resumed request held the earlier turns: ${res.result}`);
        assert.ok(texts(r.events).some((x) => x.includes("MOCK_REPLY")));
        const call = mock.modelCalls().at(-1)!;
        assert.ok(call.body.includes(`MOCK_WRITE_FILE ${out}`), "turn 1 was resent");
        assert.equal((await lab.files(task, 2)).session, first, "the same session");
        const calls = mock.modelCalls().length - before;
        assert.equal(
          res.usage?.output_tokens,
          calls * MOCK_USAGE.output,
          `${agent}: run 2's tokens are its own ${calls} calls`,
        );
        assertInjected(lab, agent, before);
      });
    }

    await t.step(
      "opencode: a session opencode no longer has fails the run, opens no other",
      async () => {
        const before = lab.anthropic.modelCalls().length;
        const gone = "ses_0123456789abcdefGONE";
        await lab.prepare("t2-gone", 2, "Continue\n", {
          session_id: `${gone}\n`,
          cwd: "/home/agentuser\n",
        });
        const r = await lab.run("opencode", "t2-gone", 2);
        const res = result(r);
        assert.equal(res.is_error, true);
        assert.notEqual(r.code, 0);
        assert.equal(r.exit, String(r.code));
        assert.equal(r.session, gone, "the task's session is unchanged");
        assert.ok(!r.events.some((e) => e.type === "system"), "no other session was opened");
        assert.equal(lab.anthropic.modelCalls().length, before, "no model call was made");
      },
    );

    await t.step("pi: a session Pi has not saved cannot be resumed", async () => {
      const before = lab.anthropic.modelCalls().length;
      await lab.prepare("t3-unsaved", 2, "Continue\n", {
        session_id: "01a231e7-a8fb-7000-8000-000000000003\n",
        cwd: "/home/agentuser\n",
      });
      const r = await lab.run("pi", "t3-unsaved", 2);
      const res = result(r);
      assert.equal(res.is_error, true);
      assert.match(res.result, /is not saved/);
      assert.equal(lab.anthropic.modelCalls().length, before, "pi was not started");
      const ls = await lab.user(`ls ${lab.taskDir("t3-unsaved")}`);
      assert.ok(!ls.stdout.includes("pi-session.jsonl"), "no new session file was made");
    });

    // before the TERM steps: a call cut mid-stream has no output tokens to count
    await t.step("the proxy counted the instance's model calls and tokens", async () => {
      const calls = lab.anthropic.modelCalls().length;
      const a = await lab.activity();
      assert.ok(a, "the proxy knows the instance");
      assert.equal(a.requests, calls, "every Anthropic model call, and nothing else");
      assert.equal(a.output_tokens, calls * MOCK_USAGE.output);
      assert.equal(a.input_tokens, calls * MOCK_USAGE.input);
      if (ONLY.includes("codex")) {
        assert.ok(a.traffic_requests > 0, "Codex's OpenAI calls show in traffic_*");
      }
    });

    for (const agent of ONLY) {
      await t.step(
        `${agent}: a TERM mid-turn ends the run with 143 and leaves nothing running`,
        async () => {
          const mock = agent === "codex" ? lab.openai : lab.anthropic;
          const task = `t4-${agent}`;
          await lab.prepare(task, 1, "Take your time: MOCK_SLOW\n");
          const before = mock.modelCalls().length;
          for (let i = 0; i < 3; i++) mock.queue({ delayMs: 2000 }); // a slow stream: in flight
          const running = lab.run(agent, task, 1);
          running.catch(() => {}); // awaited below; a failed step must not leave it unhandled
          const deadline = Date.now() + 120_000;
          while (mock.modelCalls().length === before && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 200));
          }
          assert.ok(mock.modelCalls().length > before, `${agent} called the model`);
          await lab.signal(task, 1);
          const r = await running;
          mock.clearQueue();
          assert.equal(r.exit, "143", r.output);
          const res = result(r);
          assert.equal(res.is_error, true);
          let left: string[] = [];
          for (let i = 0; i < 20; i++) {
            left = await lab.taskProcesses(task);
            if (left.length === 0) break;
            await new Promise((r) => setTimeout(r, 250));
          }
          assert.deepEqual(left, [], `${agent}: nothing of the task runs`);
          if (agent === "pi") {
            // Pi saves its session with the first answer: cut before it, the task has none
            assert.equal(r.session, undefined, "pi had not saved its session: the task has none");
            await lab.prepare(task, 2, "Continue\n");
            const again = await lab.run(agent, task, 2);
            assert.match(result(again).result, /is not saved/);
            assert.equal(mock.modelCalls().length, before + 1, "the refused run made no call");
          }
        },
      );
    }

    await t.step("no real credential is on the guest's disk or in its processes", async () => {
      const r = await lab.root(
        `grep -rIl -e '${REAL.anthropic}' -e '${REAL.openai}' /home /root /etc /tmp /var/lib/isx /opt /run 2>/dev/null; ` +
          `cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -e '${REAL.anthropic}' -e '${REAL.openai}' || true`,
      );
      assert.equal(r.trim(), "0", r);
    });
  },
});
