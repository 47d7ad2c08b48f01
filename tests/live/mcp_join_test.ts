/**
 * Joining a delegated task (§12.4) end to end: the SDK client (with `isx/task_changed`)
 * against the real `isx mcp`, a Claude Code delegation in a `tpl-agents` instance answered
 * by the scripted model mock through the agents lab's proxy, then a person joins through a
 * real tmux session running `bin/isx shell --task <id>` (Claude's own interactive resume of
 * the session). While they are in: the poller's notification says `attached` before anything
 * else reads the task, task_status reads `attached` with the pid of their `claude --resume`,
 * so does list_instances, `send_message` is refused
 * `wrong_state` naming that pid, and a second join is refused. They quit; the task reads
 * `finished` again and the notification follows. Plus the CLI's refusals: an unknown task,
 * a command task, a turn still running. Needs tmux and the built template; without them the
 * test is ignored with a printed reason.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import {
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  until as poll,
} from "../helpers/live.ts";
import { call, checkResult, connect, makeHome, type McpHome, refusal } from "../helpers/mcp.ts";
import { ROOT } from "../helpers/spawn.ts";
import { AGENTS_TEMPLATE, AgentsLab, ensureTemplate, PROJECT } from "../helpers/agents_lab.ts";

const HAVE_TMUX = await new Deno.Command("tmux", { args: ["-V"], stdout: "null", stderr: "null" })
  .output().then((o) => o.success, () => false);
const WANTED = Deno.env.get("ISX_TEST_AGENTS") !== "0";
const HAVE = !NO_INCUS && WANTED && HAVE_TMUX && await ensureTemplate().then(() => true); // built in this run's lab
if (!NO_INCUS && WANTED && !HAVE) {
  // deno-lint-ignore no-console
  console.error(
    `join live test skipped: ${
      HAVE_TMUX ? `no ${AGENTS_TEMPLATE} (isx build tpl-agents)` : "no tmux"
    }`,
  );
}

type Change = { task_id: string; run: number; state: string; exit_code?: number };
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;
const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const until = <T>(what: string, f: () => Promise<T | undefined>, ms = 90_000) =>
  poll(what, f, ms, 500);

async function status(c: Client, task: string, wait = 0): Promise<Record<string, unknown>> {
  const r = await call(c, "task_status", { task_id: task, wait_seconds: wait });
  assert.equal(refusal(r), undefined, text(r));
  checkResult("task_status", r);
  return sc(r);
}

const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** `bin/isx shell --no-preflight --task <id>` with the test's isx home, run to its end. */
async function isxJoin(h: McpHome, task: string) {
  const o = await new Deno.Command(`${ROOT}/bin/isx`, {
    args: ["shell", "--no-preflight", "--task", task],
    env: { ...Deno.env.toObject(), ...h.env, INCUS_SOCKET: LIVE_SOCKET },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: o.code, stderr: new TextDecoder().decode(o.stderr) };
}

/** A tmux server of this test's own (its socket name), so nothing else's sessions are touched. */
class Tmux {
  readonly sock = `isx-join-${crypto.randomUUID().slice(0, 8)}`;
  async run(...args: string[]): Promise<{ ok: boolean; out: string }> {
    const o = await new Deno.Command("tmux", {
      args: ["-L", this.sock, ...args],
      stderr: "piped",
      stdout: "piped",
    })
      .output();
    return { ok: o.success, out: new TextDecoder().decode(o.stdout) };
  }
  async alive(session = "join"): Promise<boolean> {
    return (await this.run("has-session", "-t", session)).ok;
  }
  async close(): Promise<void> {
    await this.run("kill-server");
    const dir = `${Deno.env.get("TMUX_TMPDIR") || "/tmp"}/tmux-${Deno.uid()}`;
    await Deno.remove(`${dir}/${this.sock}`).catch(() => {}); // the server leaves its socket
  }
}

Deno.test({
  name: "isx shell --task joins a delegated Claude task through tmux: attached, refused, finished",
  ignore: !HAVE,
  async fn(t) {
    const h = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
    const c = await connect(h, "legacy", { experimental: true, extra: ["--no-preflight"] });
    const seen: Change[] = [];
    c.fallbackNotificationHandler = (n) => {
      if (n.method === "notifications/isx/task_changed") seen.push(n.params as unknown as Change);
      return Promise.resolve();
    };
    const tmux = new Tmux();
    let lab: AgentsLab | undefined;
    let instance = "";
    try {
      const made = await call(c, "create_instance", {
        template: AGENTS_TEMPLATE,
        name_hint: "join",
      });
      assert.equal(refusal(made), undefined, text(made));
      instance = String(sc(made).instance);
      lab = await AgentsLab.open({ instance });
      // runs and the person's login shell both read the lab's endpoints from the profile
      await lab.pushLoginEnv();

      let task = "";
      await t.step("a finished agent task carries its join_command, nobody attached", async () => {
        const r = await call(c, "delegate", {
          instance,
          agent: "claude",
          cwd: PROJECT,
          instruction: "Say hello",
        });
        assert.equal(refusal(r), undefined, text(r));
        task = String(sc(r).task_id);
        const st = await status(c, task, 120);
        assert.equal(st.state, "finished", JSON.stringify(st));
        assert.equal(st.join_command, `isx shell --task ${task}`);
        assert.equal(st.attached_pid, undefined);
      });

      await t.step("the CLI refuses an unknown task and a command task, saying why", async () => {
        const unknown = await isxJoin(h, "t99-none");
        assert.equal(unknown.code, 3, unknown.stderr);
        assert.match(unknown.stderr, /join task "t99-none": not in any running instance/);
        const bg = await call(c, "exec", { instance, command: "true", background: true });
        assert.equal(refusal(bg), undefined, text(bg));
        const cmdTask = String(sc(bg).task_id);
        const st = await status(c, cmdTask, 60);
        assert.equal(st.join_command, undefined, "a command task has no join_command");
        const cmd = await isxJoin(h, cmdTask);
        assert.equal(cmd.code, 1, cmd.stderr);
        assert.match(cmd.stderr, /is a command task, with no conversation to join/);
      });

      await t.step("the CLI refuses a task still running a turn", async () => {
        const mock = lab!.anthropic;
        const before = mock.modelCalls().length;
        for (let i = 0; i < 3; i++) mock.queue({ delayMs: 3000 });
        const r = await call(c, "send_message", { task_id: task, message: "MOCK_SLOW" });
        assert.equal(refusal(r), undefined, text(r));
        await until(
          "the model call",
          () => Promise.resolve(mock.modelCalls().length > before ? true : undefined),
        );
        const busy = await isxJoin(h, task);
        assert.equal(busy.code, 7, busy.stderr);
        assert.match(busy.stderr, /still running turn 2; wait until it finishes/);
        await call(c, "cancel_task", { task_id: task });
        mock.clearQueue();
        assert.equal((await status(c, task, 60)).state, "finished");
      });

      /** A person joins `task` through tmux, is seen and refused, then leaves. */
      const joinAndLeave = async (agent: string, task: string, shape: (sid: string) => RegExp) => {
        const session = `join-${agent}`;
        const rc = `${h.dir}/${session}.rc`;
        const script = `${h.dir}/${session}.sh`;
        let pid = 0;
        await t.step(
          `${agent}: a person joins through tmux: attached, with their pid`,
          async () => {
            Deno.writeTextFileSync(
              script,
              Object.entries({
                PATH: Deno.env.get("PATH") ?? "",
                ...h.env,
                INCUS_SOCKET: LIVE_SOCKET,
                TERM: "xterm-256color",
              }).map(([k, v]) => `export ${k}=${q(v)}\n`).join("") +
                `${q(`${ROOT}/bin/isx`)} shell --no-preflight --task ${task}\necho $? >${q(rc)}\n`,
            );
            const started = await tmux.run(
              "new-session",
              "-d",
              "-s",
              session,
              "-x",
              "120",
              "-y",
              "40",
              `bash ${q(script)}`,
            );
            assert.ok(started.ok, "tmux started");
            // the poller's slow round tells first: nothing else reads the task meanwhile
            await until("the attached notification", () =>
              Promise.resolve(
                seen.some((e) => e.task_id === task && e.state === "attached") ? true : undefined,
              ), 180_000); // a slow round every ~10 s, but a loaded incusd can stall an exec
            const st = await status(c, task);
            assert.equal(st.state, "attached", JSON.stringify(st));
            pid = Number(st.attached_pid);
            assert.ok(pid > 0, JSON.stringify(st));
            const argv = await lab!.root(
              `tr '\\0' ' ' </proc/${pid}/cmdline; echo; stat -c %U /proc/${pid}`,
            );
            const res = sc(await call(c, "task_result", { task_id: task }));
            assert.ok(typeof res.session_id === "string", JSON.stringify(res));
            assert.equal(res.state, "attached", "task_result says attached too");
            assert.match(argv, shape(res.session_id as string), argv);
            assert.match(argv, /\nagentuser\n$/, "the agent runs as agentuser");
            const cwd = await lab!.root(`readlink /proc/${pid}/cwd`);
            assert.equal(cwd.trim(), PROJECT, "in the task's directory");
            const listed = sc(await call(c, "list_instances")).instances as Record<
              string,
              unknown
            >[];
            const mine = listed.find((i) => i.instance === instance)!;
            assert.equal(
              (mine.tasks as { task_id: string; state: string }[]).find((x) => x.task_id === task)
                ?.state,
              "attached",
            );
          },
        );

        await t.step(
          `${agent}: send_message is refused naming the pid; a second join too`,
          async () => {
            const r = await call(c, "send_message", { task_id: task, message: "hello?" });
            assert.equal(refusal(r), "wrong_state", text(r));
            assert.match(
              text(r),
              new RegExp(`attached: a person is in its conversation \\(pid ${pid},`),
            );
            const second = await isxJoin(h, task);
            assert.equal(second.code, 7, second.stderr);
            assert.match(
              second.stderr,
              new RegExp(`someone is already in its conversation \\(pid ${pid}\\)`),
            );
          },
        );

        await t.step(
          `${agent}: the person leaves: finished again, the notification follows`,
          async () => {
            // Claude's first screen in a new folder asks for trust: Escape leaves; the others
            // quit on Ctrl-C or Ctrl-D; a person who closes the terminal leaves too (hang-up)
            for (const key of ["Escape", "C-c", "C-c", "C-d"]) {
              if (!(await tmux.alive(session))) break;
              await tmux.run("send-keys", "-t", session, key);
              await sleep(1500);
            }
            let hungUp = false;
            if (await tmux.alive(session)) {
              await sleep(5000);
              if (await tmux.alive(session)) {
                hungUp = true;
                await tmux.run("kill-session", "-t", session);
              }
            }
            await until(
              "the tmux session to end",
              async () => (await tmux.alive(session)) ? undefined : true,
              30_000,
            );
            if (!hungUp) {
              assert.match(Deno.readTextFileSync(rc), /^\d+\n$/, "isx shell ended");
            }
            // again the poller tells first (a slow round within ~10 s), then task_status agrees
            await until("the finished notification", () => {
              const mine = seen.filter((e) => e.task_id === task).map((e) => e.state);
              const at = mine.lastIndexOf("attached");
              return Promise.resolve(
                at >= 0 && mine.slice(at + 1).includes("finished") ? true : undefined,
              );
            }, 60_000);
            const st = await status(c, task);
            assert.equal(st.state, "finished", JSON.stringify(st));
            assert.equal(st.attached_pid, undefined);
            assert.equal(
              (await lab!.root(`[ -e /proc/${pid} ] && echo alive || echo gone`)).trim(),
              "gone",
            );
          },
        );
      };

      await joinAndLeave("claude", task, (sid) => new RegExp(`^claude --resume ${sid} `));

      // ISX_TEST_JOIN_AGENTS=codex,pi,opencode adds the other agents' joins
      const SHAPES: Record<string, (sid: string) => RegExp> = {
        codex: (sid) => new RegExp(`codex resume ${sid} `),
        pi: () => /^pi /, // Pi renames itself: its arguments are gone
        opencode: (sid) => new RegExp(`^opencode --session ${sid} `),
      };
      for (const agent of (Deno.env.get("ISX_TEST_JOIN_AGENTS") ?? "").split(",")) {
        if (!SHAPES[agent]) continue;
        let other = "";
        await t.step(`${agent}: a delegated task finishes`, async () => {
          const r = await call(c, "delegate", {
            instance,
            agent,
            cwd: PROJECT,
            instruction: "Say hello",
          });
          assert.equal(refusal(r), undefined, text(r));
          other = String(sc(r).task_id);
          const st = await status(c, other, 180);
          assert.equal(st.state, "finished", JSON.stringify(st));
          assert.equal(st.join_command, `isx shell --task ${other}`);
        });
        await joinAndLeave(agent, other, SHAPES[agent]!);
      }
    } finally {
      await tmux.close();
      if (instance) await call(c, "destroy_instance", { instance }).catch(() => {});
      await c.close();
      // whatever this test's server made, even a create that failed half-way
      const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
      for (const i of await incus.listInstances().catch(() => [])) {
        if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
          await removeInstance(incus, i.name).catch(() => {});
        }
      }
      incus.close();
      await lab?.[Symbol.asyncDispose]();
      await Deno.remove(h.dir, { recursive: true }).catch(() => {});
    }
  },
});
