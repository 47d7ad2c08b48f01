/**
 * One call's life in `isx mcp` on real Incus: a foreground exec reports progress with its
 * last output line at most once a second; a cancelled exec (the SDK's abort, which sends
 * `notifications/cancelled`) kills the command in the guest; SIGTERM ends the session as end
 * of input does, releasing its instances as orphans (stamped, never destroyed).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps } from "../../mcp/mod.ts";
import { LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, removeInstance } from "../helpers/live.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { call, connect, makeHome, rawServer, refusal } from "../helpers/mcp.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts): never the user's tpl-minimal
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
/** No proxy runs in these tests (its port is 9): the preflight is skipped. */
const NP = ["--no-preflight"];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sc = (r: Record<string, unknown>) => r.structuredContent as Record<string, unknown>;

Deno.test({
  name:
    "exec progress carries the last line at most 1/s; a cancelled exec kills its command; SIGTERM releases",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    try {
      const c = await connect(h, "legacy", { extra: NP });
      try {
        const name = String(
          sc(await call(c, "create_instance", { template: TEMPLATE, name_hint: "calls" })).instance,
        );
        await t.step("progress: the last output line, at most once a second", async () => {
          const seen: { at: number; message: string | undefined }[] = [];
          const r = await c.callTool({
            name: "exec",
            arguments: {
              instance: name,
              command: "for i in 1 2 3 4 5; do echo line $i; sleep 1; done",
            },
          }, {
            onprogress: (p) => seen.push({ at: performance.now(), message: p.message }),
          }) as Record<string, unknown>;
          assert.equal(sc(r).exit_code, 0);
          assert.ok(seen.length >= 2, `progress seen: ${JSON.stringify(seen)}`);
          assert.ok(seen.every((p) => /^line [1-5]$/.test(p.message ?? "")), JSON.stringify(seen));
          for (let i = 1; i < seen.length; i++) {
            assert.ok(seen[i]!.at - seen[i - 1]!.at >= 900, "at most one progress a second");
          }
        });
        await t.step(
          "instance_activity maps every field of the proxy's /activity; idle_seconds only when idle",
          async () => {
            const now = Date.now();
            const entry = (inFlight: number) => ({
              counting_since: now - 60_000,
              requests: 3,
              in_flight: inFlight,
              last_request_at: now - 20_000,
              last_response_at: now - 10_000,
              input_tokens: 10,
              output_tokens: 20,
              cache_read_input_tokens: 30,
              cache_creation_input_tokens: 40,
              ...(inFlight ? {} : { idle_seconds: 10 }),
              traffic_requests: 7,
              traffic_requests_in_flight: inFlight,
              traffic_bytes_sent: 100,
              traffic_bytes_received: 200,
              traffic_websockets_in_flight: 0,
              traffic_last_request_at: now - 5_000,
            });
            let inFlight = 0;
            // a loopback stand-in for the proxy's ops port, named in this user's config
            const fake = Deno.serve(
              { hostname: "127.0.0.1", port: 0, onListen() {} },
              (req) =>
                new URL(req.url).pathname === "/activity"
                  ? Response.json({
                    instances: { [`${LIVE_PROJECT}/${name}`]: entry(inFlight) },
                    model_usage_providers: ["anthropic"],
                  })
                  : new Response("no", { status: 404 }),
            );
            try {
              Deno.writeTextFileSync(
                `${h.configDir}/config.yaml`,
                `proxy:\n  ports: {health: ${fake.addr.port}}\n`,
              );
              const idle = sc(await call(c, "instance_activity", { instance: name }));
              assert.equal(idle.instance, name);
              assert.equal(idle.requests, 3);
              assert.equal(idle.requests_in_flight, 0);
              assert.equal(idle.idle_seconds, 10);
              assert.deepEqual(idle.model_usage_providers, ["anthropic"]);
              assert.equal(idle.cache_creation_input_tokens, 40);
              assert.equal(idle.traffic_bytes_received, 200);
              assert.equal(typeof idle.counting_since, "string");
              assert.equal("traffic_last_response_at" in idle, false, "an absent value is omitted");
              inFlight = 1;
              const busy = sc(await call(c, "instance_activity", { instance: name }));
              assert.equal(busy.requests_in_flight, 1);
              assert.equal(
                "idle_seconds" in busy,
                false,
                "no idle_seconds while a call is in flight",
              );
            } finally {
              Deno.writeTextFileSync(
                `${h.configDir}/config.yaml`,
                "proxy:\n  ports: {health: 9}\n",
              );
              await fake.shutdown();
            }
            const down = await call(c, "instance_activity", { instance: name });
            assert.equal(refusal(down), "unavailable");
          },
        );
        await t.step(
          "a cancelled foreground exec is not answered and its command is killed",
          async () => {
            const ctrl = new AbortController();
            const running = c.callTool({
              name: "exec",
              arguments: { instance: name, command: "sleep 300; echo never" },
            }, { signal: ctrl.signal });
            await sleep(2000);
            ctrl.abort();
            await assert.rejects(running);
            let left = "";
            for (let i = 0; i < 40; i++) {
              left = String(
                sc(await call(c, "exec", { instance: name, command: "pgrep -x sleep || true" }))
                  .stdout,
              );
              if (left === "") break;
              await sleep(250);
            }
            assert.equal(left, "", "the cancelled command's sleep is gone");
          },
        );
      } finally {
        await c.close();
      }
      await t.step("SIGTERM releases the session's instances as orphans", async () => {
        const p = await rawServer(h, "term", NP);
        let name = "";
        try {
          await p.send({
            jsonrpc: "2.0",
            id: 2,
            method: "tools/call",
            params: {
              name: "create_instance",
              arguments: { template: TEMPLATE, name_hint: "term" },
            },
          });
          for (;;) {
            const m = await p.readJson(300_000);
            if (m.id === 2) {
              name = String(
                ((m.result as Record<string, unknown>).structuredContent as { instance: string })
                  .instance,
              );
              break;
            }
          }
          p.child.kill("SIGTERM");
          assert.equal((await p.wait()).code, 0);
        } finally {
          await p[Symbol.asyncDispose]();
        }
        const inst = (await incus.getInstance(name)).value;
        const st = readStamps(inst.config);
        assert.equal(inst.status, "Running", "released, not stopped or destroyed");
        assert.ok(st["mcp-orphaned"]?.endsWith(` ${st["mcp-session"]}`), JSON.stringify(st));
      });
    } finally {
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
          await removeInstance(incus, i.name);
        }
      }
      incus.close();
    }
  },
});

Deno.test({
  name:
    "create_instance from_instance forks a stopped held instance without its tasks or stamps; a running source is wrong_state",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const h = makeHome({ mcp: `templates: [${TEMPLATE}]\n` });
    try {
      const c = await connect(h, "modern", { extra: NP });
      try {
        const src = String(
          sc(
            await call(c, "create_instance", {
              template: TEMPLATE,
              name_hint: "src",
              purpose: "source",
              idempotency_key: "src-key",
            }),
          ).instance,
        );
        await call(c, "exec", { instance: src, command: "echo made-in-source > ~/marker" });
        const bg = sc(await call(c, "exec", { instance: src, command: "true", background: true }));
        await call(c, "wait_any", { task_ids: [String(bg.task_id)], timeout_seconds: 60 });
        const running = await call(c, "create_instance", { from_instance: src });
        assert.equal(refusal(running), "wrong_state");
        assert.match((running.content as { text: string }[])[0]!.text, /stop_instance/);
        await call(c, "stop_instance", { instance: src });
        const f = sc(
          await call(c, "create_instance", {
            from_instance: src,
            name_hint: "fork",
            idempotency_key: "fork-key",
          }),
        );
        assert.equal(f.forked_from, src);
        assert.equal(f.template, TEMPLATE);
        const fork = String(f.instance);
        const st = readStamps((await incus.getInstance(fork)).value.config);
        assert.equal(st["mcp-idempotency-key"], "fork-key", "the source's key is not inherited");
        assert.equal(st["mcp-purpose"], undefined, "nor its purpose");
        assert.equal(st["parent"], src);
        const look = sc(
          await call(c, "exec", {
            instance: fork,
            command: "cat ~/marker; ls ~/.isx-mcp/tasks 2>/dev/null | wc -l",
          }),
        );
        assert.equal(look.stdout, "made-in-source\n0\n");
        const again = sc(
          await call(c, "create_instance", { from_instance: src, idempotency_key: "fork-key" }),
        );
        assert.deepEqual([again.instance, again.replayed, again.forked_from], [fork, true, src]);
        const other = await call(c, "create_instance", {
          template: TEMPLATE,
          idempotency_key: "fork-key",
        });
        assert.equal(refusal(other), "invalid_argument");
      } finally {
        await c.close();
      }
    } finally {
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${h.stateDir}`)) {
          await removeInstance(incus, i.name);
        }
      }
      incus.close();
    }
  },
});
