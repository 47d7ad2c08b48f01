/**
 * `isx mcp` against real Incus through the current TypeScript SDK client: the seed-000
 * program flow in both eras (list_templates, keyed create, exec, a background task whose
 * change arrives, the keyed repeat answering replayed, destroy), hostile values reaching the
 * guest as data, limits naming counts, a session that adopts another's instances while the
 * first is told `released` (a server killed mid-create: mcp_crash_test.ts). Every result is validated against the golden output schemas. Instances are
 * named `mcp-minimal-<hint>-…` with hints of this file and removed at the end.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/client";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import { LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, removeInstance, until } from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { call, connect, makeHome, mcpCommand, type McpHome, refusal } from "../helpers/mcp.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
/** No proxy runs in these tests (its port is 9): the preflight is skipped, as isx branch --no-preflight. */
const NP = ["--no-preflight"];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Change = { task_id: string; instance: string; run: number; state: string; exit_code?: number };

function listen(client: Client): Change[] {
  const seen: Change[] = [];
  client.fallbackNotificationHandler = (n) => {
    if (n.method === "notifications/isx/task_changed") seen.push(n.params as unknown as Change);
    return Promise.resolve();
  };
  return seen;
}

function home(extra = ""): McpHome {
  return makeHome({ mcp: `templates: [${TEMPLATE}]\nmax-concurrent-tasks: 1\n${extra}` });
}

async function cleanup(incus: IncusClient, h: McpHome): Promise<void> {
  for (const i of await incus.listInstances()) {
    const s = readStamps(i.config);
    // only what this test's servers made: their owner names this test's state dir
    if (s["mcp-owner"]?.endsWith(`:${h.stateDir}`)) await removeInstance(incus, i.name);
  }
}

async function templateBuilt(incus: IncusClient): Promise<boolean> {
  try {
    return readStamps((await incus.getInstance(TEMPLATE)).value.config)["type"] === "base";
  } catch {
    return false;
  }
}

const text = (r: Record<string, unknown>) => (r.content as { text: string }[])[0]!.text;
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

Deno.test({
  name:
    "isx mcp runs the program flow on real Incus, in handshake mode, with every tool's result schema-checked",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = home("max-instances: 1\n");
    try {
      if (!await templateBuilt(incus)) {
        await using b = spawnProgram(["build", TEMPLATE], {
          env: mcpCommand(h).env,
          prog: "isx",
          cwd: h.dir,
        });
        await b.closeStdin();
        assert.equal((await b.wait(600_000)).code, 0, `isx build ${TEMPLATE}: ${b.stderr()}`);
      }
      const client = await connect(h, "legacy", { experimental: true, extra: NP });
      const changes = listen(client);
      try {
        let name = "";
        await t.step(
          "without --no-preflight, a create with no proxy answering is refused",
          async () => {
            const strict = await connect(h, "legacy");
            try {
              const r = await call(strict, "create_instance", { template: TEMPLATE });
              assert.equal(refusal(r), "refused");
              assert.match(text(r), /isx proxy start/);
            } finally {
              await strict.close();
            }
          },
        );
        await t.step(
          "list_templates shows the approved, built template and the limits",
          async () => {
            const r = sc(await call(client, "list_templates"));
            const tpl = (r.templates as Record<string, unknown>[])[0]!;
            assert.equal(tpl.template, TEMPLATE);
            assert.equal(tpl.built, true);
            assert.equal(r.max_instances, 1);
            assert.equal(r.max_concurrent_tasks, 1);
          },
        );
        await t.step(
          "create_instance with a key, then the same key concurrently is busy",
          async () => {
            const first = call(client, "create_instance", {
              template: TEMPLATE,
              name_hint: "flow",
              purpose: "live test",
              idempotency_key: "live-flow-1",
            });
            await sleep(300);
            const second = await call(client, "create_instance", {
              template: TEMPLATE,
              idempotency_key: "live-flow-1",
            });
            assert.equal(refusal(second), "busy", text(second));
            const r = await first;
            assert.equal(refusal(r), undefined, text(r));
            name = String(sc(r).instance);
            assert.match(name, /^mcp-minimal-flow-[a-z2-7]{5}$/);
            const st = readStamps((await incus.getInstance(name)).value.config);
            assert.equal(st["mcp-idempotency-key"], "live-flow-1");
            assert.equal(st["mcp-purpose"], "live test");
            assert.equal(st["mcp-client"], "isx-test");
          },
        );
        await t.step(
          "the repeat answers replayed; another template under the key is invalid_argument; the limit names counts",
          async () => {
            const again = sc(
              await call(client, "create_instance", {
                template: TEMPLATE,
                idempotency_key: "live-flow-1",
              }),
            );
            assert.equal(again.instance, name);
            assert.equal(again.replayed, true);
            const other = await call(client, "create_instance", {
              template: "tpl-dev",
              idempotency_key: "live-flow-1",
            });
            assert.equal(refusal(other), "invalid_argument");
            const over = await call(client, "create_instance", { template: TEMPLATE });
            assert.equal(refusal(over), "limit");
            assert.match(text(over), /1 of 1/);
          },
        );
        await t.step(
          "exec runs in the foreground with tails; hostile values stay data",
          async () => {
            const r = sc(
              await call(client, "exec", {
                instance: name,
                command: "echo hi; echo err >&2; exit 3",
              }),
            );
            assert.equal(r.exit_code, 3);
            assert.equal(r.stdout, "hi\n");
            assert.equal(r.stderr, "err\n");
            const evil = "$(touch /tmp/pwned-env); `touch /tmp/pwned-env2`'\"";
            const e = sc(
              await call(client, "exec", {
                instance: name,
                command: 'printf %s "$EVIL"',
                env: { EVIL: evil },
              }),
            );
            assert.equal(e.stdout, evil);
            const c = sc(
              await call(client, "exec", {
                instance: name,
                command: "pwd",
                cwd: "/tmp/x;touch /tmp/pwned-cwd",
              }),
            );
            assert.equal(c.exit_code, 125);
            const badEnv = await call(client, "exec", {
              instance: name,
              command: "true",
              env: { "A;touch /tmp/p": "x" },
            });
            assert.equal(refusal(badEnv), "invalid_argument");
            const hint = await call(client, "create_instance", {
              template: TEMPLATE,
              name_hint: "a;touch /tmp/p",
            });
            assert.equal(refusal(hint), "invalid_argument");
            const look = sc(
              await call(client, "exec", {
                instance: name,
                command:
                  "ls /tmp/pwned-env /tmp/pwned-env2 /tmp/pwned-cwd /tmp/p 2>&1 | wc -l; ls /tmp/pwned* 2>/dev/null | wc -l",
              }),
            );
            assert.match(String(look.stdout), /\n0\n$/);
          },
        );
        await t.step(
          "a background task: running then finished with exit_code, replayed by key, limited by max-concurrent-tasks",
          async () => {
            const r = sc(
              await call(client, "exec", {
                instance: name,
                command: "sleep 3; echo done; exit 7",
                background: true,
                idempotency_key: "bg-1",
              }),
            );
            const id = String(r.task_id);
            assert.equal(r.kind, "command");
            const again = sc(
              await call(client, "exec", {
                instance: name,
                command: "sleep 3; echo done; exit 7",
                background: true,
                idempotency_key: "bg-1",
              }),
            );
            assert.deepEqual([again.task_id, again.replayed], [id, true]);
            const mismatch = await call(client, "exec", {
              instance: name,
              command: "true",
              background: true,
              idempotency_key: "bg-1",
            });
            assert.equal(refusal(mismatch), "invalid_argument");
            const over = await call(client, "exec", {
              instance: name,
              command: "sleep 1",
              background: true,
            });
            assert.equal(refusal(over), "limit", text(over));
            assert.match(text(over), /1 of max_concurrent_tasks 1/);
            const early = await call(client, "task_result", { task_id: id });
            assert.equal(refusal(early), "wrong_state");
            const w = sc(await call(client, "wait_any", { timeout_seconds: 60 }));
            assert.deepEqual(w.finished, [id]);
            const res = sc(await call(client, "task_result", { task_id: id }));
            assert.equal(res.exit_code, 7);
            assert.equal(res.stdout, "done\n");
            const mine = await until(
              "the finished notification",
              () =>
                changes.some((c) => c.task_id === id && c.state === "finished")
                  ? changes.filter((c) => c.task_id === id)
                  : undefined,
              30_000,
            );
            assert.deepEqual(mine.map((c) => c.state), ["running", "finished"]);
            assert.equal(mine[1]!.exit_code, 7);
            const st = sc(await call(client, "task_status", { task_id: id }));
            assert.equal(st.state, "finished");
            assert.equal(
              changes.filter((c) => c.task_id === id).length,
              2,
              "one notification per transition",
            );
          },
        );
        await t.step("stop, wrong_state, start, keep, activity, destroy", async () => {
          assert.equal(sc(await call(client, "stop_instance", { instance: name })).already, false);
          const stopped = await call(client, "exec", { instance: name, command: "true" });
          assert.equal(refusal(stopped), "wrong_state");
          assert.match(text(stopped), /start_instance/);
          assert.equal(sc(await call(client, "start_instance", { instance: name })).already, false);
          const act = await call(client, "instance_activity", { instance: name });
          if (act.isError) assert.ok(["unavailable", "refused"].includes(refusal(act)!), text(act));
          else assert.equal(sc(act).instance, name);
          const gone = await call(client, "destroy_instance", { instance: name });
          assert.equal(sc(gone).already, false);
          assert.equal(
            sc(await call(client, "destroy_instance", { instance: name })).already,
            true,
          );
          const none = await call(client, "exec", { instance: name, command: "true" });
          assert.equal(refusal(none), "not_found");
        });
      } finally {
        await client.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});

Deno.test({
  name:
    "a second session adopts the first's instance with force; the first is told released and refused not_held; orphans are adoptable after the end",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = home();
    try {
      const a = await connect(h, "legacy", { experimental: true, extra: NP });
      const aChanges = listen(a);
      let name = "";
      let task = "";
      try {
        const made = await call(a, "create_instance", { template: TEMPLATE, name_hint: "adopt" });
        assert.equal(refusal(made), undefined, text(made));
        name = String(sc(made).instance);
        task = String(
          sc(await call(a, "exec", { instance: name, command: "sleep 600", background: true }))
            .task_id,
        );
        const b = await connect(h, "modern", { extra: NP });
        try {
          const held = sc(await call(b, "list_instances"));
          const entry = (held.instances as Record<string, unknown>[]).find((i) =>
            i.instance === name
          )!;
          assert.equal(entry.state, "held");
          const plain = await call(b, "adopt_instance", { instance: name });
          assert.equal(refusal(plain), "not_held");
          const taken = sc(await call(b, "adopt_instance", { instance: name, force: true }));
          assert.deepEqual(taken.tasks, [task]);
          await until(
            "released",
            () => aChanges.find((c) => c.task_id === task && c.state === "released"),
            30_000,
          );
          const stale = await call(a, "exec", { instance: name, command: "true" });
          assert.equal(refusal(stale), "not_held");
          assert.equal(sc(await call(b, "cancel_task", { task_id: task })).task_id, task);
        } finally {
          await b.close();
        }
        // b ended: its instance is an orphan now, which a may adopt back (no force)
        const orphans = sc(await call(a, "list_instances"));
        const o = (orphans.instances as Record<string, unknown>[]).find((i) =>
          i.instance === name
        )!;
        assert.equal(o.state, "orphaned");
        assert.ok(o.orphaned_since && o.orphan_until);
        const back = sc(await call(a, "adopt_instance", { instance: name }));
        assert.deepEqual(back.tasks, [task]);
        // c asks for no notifications, so it is not told when a takes the instance back: it
        // still counts it as its own, and its exec starts while the holding check runs. The
        // check refuses; the started login shell must run nothing and write nothing.
        const c = await connect(h, "modern", { extra: NP });
        try {
          assert.equal(
            refusal(await call(c, "adopt_instance", { instance: name, force: true })),
            undefined,
          );
          assert.equal(
            refusal(await call(a, "adopt_instance", { instance: name, force: true })),
            undefined,
          );
          const look = async () =>
            new TextDecoder().decode(
              (await incus.execCapture(name, [
                "sh",
                "-c",
                "ls /tmp/ran-by-c 2>/dev/null; ls /home/agentuser/.isx-mcp/run 2>/dev/null; true",
              ])).stdout,
            );
          const before = await look();
          const late = await call(c, "exec", { instance: name, command: "touch /tmp/ran-by-c" });
          assert.equal(refusal(late), "not_held", text(late));
          await new Promise((r) => setTimeout(r, 1000)); // an armed shell would have run by now
          assert.equal(await look(), before);
          assert.doesNotMatch(before, /ran-by-c/);
        } finally {
          await c.close();
        }
      } finally {
        await a.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});

Deno.test({
  name:
    "the orphan sweep of a new session destroys an idle orphan past its grace, spares one with a running task and a kept one; kept refuses adoption and its key",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = home("orphan-grace-hours: 0\n");
    const exists = async (n: string) => (await incus.listInstances()).some((i) => i.name === n);
    try {
      const a = await connect(h, "legacy", { extra: NP });
      let idle = "", busy = "", kept = "";
      try {
        idle = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "idle" })).instance,
        );
        busy = String(
          sc(await call(a, "create_instance", { template: TEMPLATE, name_hint: "busy" })).instance,
        );
        kept = String(
          sc(
            await call(a, "create_instance", {
              template: TEMPLATE,
              name_hint: "kept",
              idempotency_key: "kept-key",
            }),
          ).instance,
        );
        await call(a, "exec", { instance: busy, command: "sleep 600", background: true });
        assert.equal(sc(await call(a, "keep_instance", { instance: kept })).instance, kept);
      } finally {
        await a.close();
      }
      const b = await connect(h, "legacy", { extra: NP });
      try {
        await until(
          "the idle orphan destroyed",
          async () => (await exists(idle)) ? undefined : true,
          120_000,
        );
        assert.ok(await exists(busy), "an orphan with a running task is in use");
        assert.ok(await exists(kept), "a kept instance is never reaped");
        const log = await Deno.readTextFile(`${h.stateDir}/mcp/mcp.log`);
        assert.match(log, new RegExp(`tool=reap-orphans instance=${idle} outcome=destroyed`));
        const adoptKept = await call(b, "adopt_instance", { instance: kept });
        assert.equal(refusal(adoptKept), "refused");
        const keyed = await call(b, "create_instance", {
          template: TEMPLATE,
          idempotency_key: "kept-key",
        });
        assert.equal(refusal(keyed), "refused");
        assert.match(text(keyed), /keep_instance/);
      } finally {
        await b.close();
      }
    } finally {
      await cleanup(incus, h);
      incus.close();
    }
  },
});
