/**
 * The task engine (mcp/tasks) against a real container: background commands, status, probe,
 * listing, cancel of a whole process tree, a TERM-ignoring command, hostile values, the
 * foreground path (streamed lines, capped tails, timeout, cancel), the watcher, and the
 * exec count of a probe. One container from the test image with an `agentuser`, reused by
 * every step and deleted at the end. Waits poll the guest's own state; nothing sleeps for a
 * guessed time except the bounded polls.
 */

import assert from "node:assert/strict";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import { createTaskEngine, type TaskChange, TaskWatcher } from "../../mcp/tasks/mod.ts";
import {
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A client that counts the execs made through it (websocket and recorded alike). */
function counting(incus: IncusClient): { client: IncusClient; execs: () => number } {
  let n = 0;
  const client = new Proxy(incus, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (prop === "exec" || prop === "execCapture") n++;
        if (prop === "call" && args[0] === "POST" && /\/exec$/.test(String(args[1]))) n++;
        return v.apply(target, args);
      };
    },
  });
  return { client, execs: () => n };
}

async function sh(incus: IncusClient, name: string, script: string) {
  const r = await incus.execCapture(name, ["bash", "-c", script]);
  const dec = new TextDecoder();
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

Deno.test({
  name: "the task engine runs, reads, cancels and watches tasks in a real container",
  ignore: NO_INCUS,
  async fn(t) {
    const name = testName("tasks");
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const { client, execs } = counting(incus);
    const engine = createTaskEngine({ incus: client });
    const tag = crypto.randomUUID().slice(0, 4).replace(/[^a-z0-9]/g, "a");
    const id = (n: number) => `t${n}-${tag}`;
    const markerPids = async (taskId: string) =>
      (await sh(incus, name, `grep -l -a -z -x ISX_MCP_TASK=${taskId} /proc/[0-9]*/environ`))
        .out.trim();
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

      await t.step(
        "a background command runs, then reads finished with its code and tails",
        async () => {
          const r = await engine.startCommand(name, {
            taskId: id(1),
            command: "echo out; echo err >&2; until [ -e /tmp/go-1 ]; do sleep 0.1; done; exit 7",
            key: "job:1",
          });
          assert.deepEqual(r, { task_id: id(1), run: 1 });
          assert.equal((await engine.probe(name, [id(1)])).get(id(1)), "running");
          assert.equal((await engine.status(name, id(1))).state, "running");
          assert.equal((await sh(incus, name, "touch /tmp/go-1")).code, 0);
          await untilDone(id(1));
          const st = await engine.status(name, id(1));
          assert.equal(st.state, "finished");
          assert.equal(st.exit_code, 7);
          assert.equal(st.kind, "command");
          assert.equal(st.stdout_tail, "out\n");
          assert.equal(st.stderr_tail, "err\n");
          assert.equal(st.cwd, "/home/agentuser");
          assert.equal(st.key, "job:1");
          assert.ok(st.started_at && st.last_activity);
          const res = await engine.result(name, id(1), { outputBytes: 256 });
          assert.deepEqual(res, {
            task_id: id(1),
            state: "finished",
            exit_code: 7,
            stdout: "out\n",
            stderr: "err\n",
            stdout_bytes: 4,
            stderr_bytes: 4,
            truncated: false,
          });
          const listed = (await engine.list(name)).find((x) => x.task_id === id(1));
          assert.deepEqual(listed, {
            task_id: id(1),
            state: "finished",
            run: 1,
            exit_code: 7,
            kind: "command",
            key: "job:1",
            cwd: "/home/agentuser",
          });
          await assert.rejects(
            engine.startCommand(name, { taskId: id(1), command: "true" }),
            /already exists/,
          );
          const gone = await engine.status(name, "t99-none");
          assert.deepEqual([gone.state, gone.run], ["lost", 0]);
        },
      );

      await t.step("a launch that fails leaves no task directory behind", async () => {
        const taken = await sh(
          incus,
          name,
          `systemd-run --quiet --collect --unit=isx-task-${id(10)}-1 -- sleep 600`,
        );
        assert.equal(taken.code, 0, taken.err);
        await assert.rejects(
          engine.startCommand(name, { taskId: id(10), command: "true" }),
          (e: Error) => /launch task .* exit 1/.test(e.message),
        );
        const left = await sh(incus, name, `ls -d /home/agentuser/.isx-mcp/tasks/${id(10)}`);
        assert.notEqual(left.code, 0);
        assert.deepEqual((await engine.probeStates(name, [id(10)])).get(id(10)), {
          state: "lost",
          run: 0,
        });
        await sh(incus, name, `systemctl stop isx-task-${id(10)}-1`);
      });

      await t.step(
        "an agent-kind run gets its prompt on stdin and its files; run 2 follows",
        async () => {
          const script = (n: number) =>
            `d=\${BASH_SOURCE[0]%/*}; export ISX_MCP_TASK=${id(11)}\n` +
            `{ printf '{"run":${n},"prompt":"%s","brief":"%s"}\\n' "$(cat "$d/prompt-${n}.md")" ` +
            `"$(cat "$d/brief.md")"; } >>"$d/events-${n}.jsonl"\n` +
            `echo 0 >"$d/.x" && mv -fT "$d/.x" "$d/exit-${n}"\n`;
          await engine.launch(name, {
            taskId: id(11),
            run: 1,
            kind: "agent",
            script: script(1),
            prompt: "first $(touch /tmp/pwned)",
            files: { "brief.md": "be brief", model: "opus[1m]" },
          });
          await untilDone(id(11));
          const st = await engine.status(name, id(11));
          assert.deepEqual([st.kind, st.model, st.state, st.exit_code], [
            "agent",
            "opus[1m]",
            "finished",
            0,
          ]);
          assert.deepEqual(JSON.parse(st.stdout_tail), {
            run: 1,
            prompt: "first $(touch /tmp/pwned)",
            brief: "be brief",
          });
          await engine.launch(name, {
            taskId: id(11),
            run: 2,
            kind: "agent",
            script: script(2),
            prompt: "second",
          });
          await untilDone(id(11));
          const st2 = await engine.status(name, id(11));
          assert.deepEqual([st2.run, st2.exit_code, JSON.parse(st2.stdout_tail).prompt], [
            2,
            0,
            "second",
          ]);
          await assert.rejects(
            engine.launch(name, {
              taskId: id(11),
              run: 3,
              kind: "agent",
              script: "",
              files: { current: "9" },
            }),
            /not a name a launch may write/,
          );
          assert.equal((await sh(incus, name, "ls /tmp/pwned* 2>/dev/null")).out, "");
        },
      );

      await t.step("a probe of many tasks costs one exec", async () => {
        const before = execs();
        const m = await engine.probe(name, [id(1), "t98-none", "t97-none"]);
        assert.equal(execs() - before, 1);
        assert.deepEqual([...m.values()], ["done", "done", "done"]);
        const s0 = execs();
        await engine.status(name, id(1));
        assert.equal(execs() - s0, 1);
      });

      await t.step(
        "cancel stops the whole tree: no process keeps the marker, exit 143",
        async () => {
          await engine.startCommand(name, {
            taskId: id(2),
            command: "sleep 1000 & (sleep 1001 &) ; bash -c 'sleep 1002' & sleep 1003; wait",
          });
          for (let i = 0; i < 50 && (await markerPids(id(2))).split("\n").length < 4; i++) {
            await sleep(100);
          }
          assert.ok((await markerPids(id(2))).split("\n").length >= 4);
          await engine.cancel(name, [id(2)]);
          assert.equal(await markerPids(id(2)), "");
          const st = await engine.status(name, id(2));
          assert.deepEqual([st.state, st.exit_code], ["finished", 143]);
          const left = await sh(incus, name, "ps -eo args | grep -c '^sleep 100[0-3]' || true");
          assert.equal(left.out.trim(), "0");
        },
      );

      await t.step("a command that ignores TERM is killed after 2 s", async () => {
        await engine.startCommand(name, {
          taskId: id(3),
          command: "trap '' TERM; while :; do sleep 0.2; done",
        });
        await sleep(300);
        const t0 = performance.now();
        await engine.cancel(name, [id(3)]);
        const took = performance.now() - t0;
        assert.ok(took >= 1900 && took < 15_000, `cancel took ${took} ms`);
        assert.equal(await markerPids(id(3)), "");
        assert.equal((await engine.status(name, id(3))).exit_code, 143);
      });

      await t.step("hostile command, env and cwd values arrive as data", async () => {
        const evil = "$(touch /tmp/pwned)`touch /tmp/pwned`'\"; touch /tmp/pwned";
        await engine.startCommand(name, {
          taskId: id(4),
          command: "printf '%s' \"$X\"",
          env: { X: evil },
          cwd: "/tmp",
        });
        await engine.startCommand(name, { taskId: id(5), command: "true", cwd: evil });
        await untilDone(id(4));
        await untilDone(id(5));
        assert.equal((await engine.status(name, id(4))).stdout_tail, evil);
        assert.equal((await engine.status(name, id(5))).exit_code, 125);
        const fg = await engine.runForeground(name, {
          command: "printf '%s' \"$X\"",
          env: { X: evil },
          outputBytes: 4096,
          signal: new AbortController().signal,
        });
        assert.equal(fg.stdout, evil);
        const fgCwd = await engine.runForeground(name, {
          command: "true",
          cwd: evil,
          outputBytes: 4096,
          signal: new AbortController().signal,
        });
        assert.equal(fgCwd.exit_code, 125);
        const pwned = await sh(incus, name, "ls /tmp/pwned* /home/agentuser/pwned* 2>/dev/null");
        assert.equal(pwned.out, "");
        await assert.rejects(
          engine.startCommand(name, { taskId: id(6), command: "true", env: { "A=B;": "x" } }),
          /invalid variable name/,
        );
        await assert.rejects(engine.status(name, "../etc"), /invalid task id/);
      });

      await t.step(
        "guest root's FIFOs and hostile records neither hang nor pass through",
        async () => {
          const d = `/home/agentuser/.isx-mcp/tasks`;
          const plant = await sh(
            incus,
            name,
            `set -e; mkdir -p ${d}/t8-${tag} ${d}/t9-${tag}; cd ${d}/t8-${tag}; mkfifo current kind cwd key
           cd ${d}/t9-${tag}; echo 1 > current; mkfifo exit-1 stdout; printf 'a|b\n' > model
           printf '$(reboot)\n' > key; printf 'relative\n' > cwd; echo command > kind`,
          );
          assert.equal(plant.code, 0, plant.err);
          const t0 = performance.now();
          const m = await engine.probeStates(name, [id(8), id(9)]);
          assert.deepEqual(m.get(id(8)), { state: "lost", run: 0 });
          assert.deepEqual(m.get(id(9)), { state: "lost", run: 1 }); // a FIFO is no exit file
          const st = await engine.status(name, id(9));
          assert.deepEqual([st.state, st.stdout_tail, st.key, st.cwd, st.model], [
            "lost",
            "",
            undefined,
            undefined,
            undefined,
          ]);
          const listed = (await engine.list(name)).filter((x) => x.task_id.endsWith(tag));
          const hostile = listed.find((x) => x.task_id === id(9))!;
          assert.deepEqual(Object.keys(hostile).sort(), ["kind", "run", "state", "task_id"]);
          assert.ok(performance.now() - t0 < 20_000, "FIFO reads blocked");
        },
      );

      await t.step("a foreground command streams lines, caps tails and times out", async () => {
        const lines: string[] = [];
        const r = await engine.runForeground(name, {
          command: "echo one; echo two >&2; cat; head -c 100000 /dev/zero | tr '\\0' a; exit 3",
          stdin: "from stdin\n",
          outputBytes: 256,
          signal: new AbortController().signal,
          onOutputLine: (l) => lines.push(l),
        });
        assert.deepEqual(lines.slice(0, 3).sort(), ["from stdin", "one", "two"]);
        assert.equal(r.exit_code, 3);
        assert.equal(r.stdout.length, 256);
        assert.equal(r.stdout_bytes, 4 + 11 + 100000);
        assert.equal(r.stderr, "two\n");
        assert.equal(r.truncated, true);
        assert.equal(r.timed_out, false);
        const to = await engine.runForeground(name, {
          command: "sleep 30",
          timeoutSeconds: 1,
          outputBytes: 256,
          signal: new AbortController().signal,
        });
        assert.deepEqual([to.exit_code, to.timed_out, to.cancelled], [124, true, false]);
      });

      await t.step("cancelling a foreground command kills its whole session", async () => {
        const ac = new AbortController();
        const started = Promise.withResolvers<void>();
        const run = engine.runForeground(name, {
          command: "sleep 1010 & (sleep 1011 &); echo started; sleep 1012",
          outputBytes: 256,
          signal: ac.signal,
          onOutputLine: (l) => l === "started" && started.resolve(),
        });
        await started.promise;
        ac.abort();
        const r = await run;
        assert.equal(r.cancelled, true);
        const left = await sh(incus, name, "ps -eo args | grep -c '^sleep 101[012]' || true");
        assert.equal(left.out.trim(), "0");
      });

      await t.step("the watcher reports running then finished once, never unknown", async () => {
        const events: TaskChange[] = [];
        const w = new TaskWatcher({ source: engine, emit: (c) => events.push(c), intervalMs: 200 });
        const r = await engine.startCommand(name, { taskId: id(7), command: "sleep 1; exit 3" });
        w.report(name, r.task_id, { state: "running", run: 1 });
        w.start();
        for (let i = 0; i < 100 && events.length < 2; i++) await sleep(100);
        await w.round();
        await w.stop();
        assert.deepEqual(events, [
          { task_id: id(7), instance: name, run: 1, state: "running" },
          { task_id: id(7), instance: name, run: 1, state: "finished", exit_code: 3 },
        ]);
      });
    } finally {
      await removeInstance(incus, name);
      incus.close();
    }
  },
});
