/**
 * A coordinator Claude Code runs the whole loop through isx mcp over HTTP (issue 20): the
 * real `claude -p` in a `tpl-agents` coordinator (on this test's own bridge, the real proxy
 * in this process with its own CA serving both `mcp.isx.internal` and the Anthropic API,
 * the latter relayed to a scripted mock on loopback) is scripted by that mock to call
 * `mcp__isx__create_instance` (a worker from the approved template) → `mcp__isx__delegate`
 * (the worker's Claude Code writes a file) → `mcp__isx__wait_any` → `mcp__isx__get_diff` →
 * `mcp__isx__destroy_instance`, and the diff reaches the coordinator's mock. The worker is
 * an ordinary branch (the template's bridge); its agent is pointed at the agents lab's proxy
 * and mock, as tests/live/mcp_delegate_test.ts does, before the coordinator's mock sends the
 * delegate. Needs the built template; without it the test is ignored with a printed reason.
 *
 * @module
 */

import { hasCode } from "../../rpc/base.ts";
import assert from "node:assert/strict";
import { copyConfig, execRecorded, readStamps } from "../../mcp/mod.ts";
import { deliverSecret, InstanceSecret, reconcileMcpClients } from "../../mcp/instances/mod.ts";
import {
  bridgeCidr,
  pickAddress,
  pinnedNic,
  takenAddresses,
} from "../../mcp/instances/static_ip.ts";
import { retargetGuestProxy } from "../../mcp/instances/retarget.ts";
import { newGrant } from "../../mcp/instances/caller_grant.ts";
import {
  ClientRegistry,
  incusSource,
  loadCa,
  MCP_HOST,
  Policy,
  startProxy,
} from "../../proxy/mod.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { applyDns } from "../../proxy/host/dns.ts";
import { contextFrom } from "../../cli/permissions.ts";
import { mcpChildSpec } from "../../cli/mcp_child.ts";
import type { CliContext } from "../../cli/command.ts";
import { LIVE_SOCKET, liveIncus, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { makeHome } from "../helpers/mcp.ts";
import { ROOT } from "../helpers/spawn.ts";
import { AGENTS_TEMPLATE, AgentsLab, ensureTemplate, PROJECT } from "../helpers/agents_lab.ts";
import { type MockScript, startMockAnthropic } from "../fakes/mock_anthropic.ts";
import { addressOf } from "./_pinned.ts";

const HAVE = !NO_INCUS && await ensureTemplate().then(() => true); // built in this run's lab
const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };
const CA_PATH = "/usr/local/share/ca-certificates/isx-proxy.crt";
const KEY = "sk-ant-api03-COORDINATOR-FLOW-0123456789";
const OUT = `${PROJECT}/flow.txt`;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function texts(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b) =>
    isObj(b) && typeof b.text === "string" ? b.text : isObj(b) ? texts(b.content) : ""
  ).join("\n");
}

/** The coordinator's script: one MCP tool per turn, each from what the last one answered. */
function flowScript(gate: (instance: string) => Promise<void>, seen: Obj[]): MockScript {
  return async (body) => {
    const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isObj);
    if (!texts(messages[0]?.content).includes("MOCK_MCP_FLOW")) return undefined;
    const tools = (Array.isArray(body.tools) ? body.tools : []).filter(isObj).map((t) =>
      String(t.name)
    );
    const calls: { name: string; result: string }[] = [];
    for (const m of messages) {
      if (!Array.isArray(m.content)) continue;
      for (const b of m.content.filter(isObj)) {
        if (b.type === "tool_use") calls.push({ name: String(b.name), result: "" });
        if (b.type === "tool_result" && calls.length) calls.at(-1)!.result = texts(b.content);
      }
    }
    const use = (name: string, input: Obj) => {
      seen.push({ name, input });
      return {
        blocks: [{
          type: "tool_use",
          id: `toolu_${crypto.randomUUID().slice(0, 12)}`,
          name,
          input,
        }],
        stop: "tool_use",
      };
    };
    const say = (text: string) => ({ blocks: [{ type: "text", text }], stop: "end_turn" });
    if (!tools.includes("mcp__isx__create_instance")) {
      return say(`MOCK_FLOW_NO_TOOLS ${tools.join(",")}`);
    }
    const field = (re: RegExp) => {
      for (const c of calls) {
        const m = re.exec(c.result);
        if (m) return m[1]!;
      }
      return "";
    };
    const instance = field(/"instance":\s*"(mcp-[a-z0-9-]+)"/);
    const task = field(/"task_id":\s*"([^"]+)"/);
    const last = calls.at(-1);
    if (!last) {
      return use("mcp__isx__create_instance", {
        template: AGENTS_TEMPLATE,
        name_hint: "flow",
        purpose: "coordinator flow",
      });
    }
    if (last.name.endsWith("create_instance")) {
      await gate(instance);
      return use("mcp__isx__delegate", {
        instance,
        agent: "claude",
        cwd: PROJECT,
        instruction: `Please do this. MOCK_WRITE_FILE ${OUT} hello-flow`,
      });
    }
    if (last.name.endsWith("delegate") || last.name.endsWith("wait_any")) {
      if (last.name.endsWith("wait_any") && /"state":\s*"finished"/.test(last.result)) {
        return use("mcp__isx__get_diff", { task_id: task });
      }
      return use("mcp__isx__wait_any", { task_ids: [task], timeout_seconds: 120 });
    }
    if (last.name.endsWith("get_diff")) return use("mcp__isx__destroy_instance", { instance });
    const diff = calls.find((c) => c.name.endsWith("get_diff"))?.result ?? "";
    return say(`MOCK_FLOW_DONE ${/hello-flow/.test(diff) ? "diff has hello-flow" : "no diff"}`);
  };
}

Deno.test({
  name:
    "a coordinator Claude Code creates, delegates, waits, reads the diff and destroys over HTTP",
  ignore: !HAVE,
  async fn() {
    const incus = liveIncus();
    const made: string[] = [];
    let lab: AgentsLab | undefined;
    let opened: Promise<void> | undefined;
    const seen: Obj[] = [];
    const gate = (instance: string) =>
      opened ??= (async () => {
        made.push(instance);
        lab = await AgentsLab.open({ instance });
        await lab.pushLoginEnv();
      })();
    const mock = startMockAnthropic({ script: flowScript(gate, seen) });
    const bridge = `icoordf${crypto.randomUUID().slice(0, 5)}`;
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
    const gateway = `${subnet}.1`;
    await incus.createNetwork({
      name: bridge,
      config: { "ipv4.address": `${gateway}/24`, "ipv4.nat": "false", "ipv6.address": "none" },
    }, { step: `create ${bridge}` });
    const home = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\nmax-instances: 3\n` });
    const healthPort = 20000 + Math.floor(Math.random() * 20000);
    Deno.writeTextFileSync(
      `${home.configDir}/config.yaml`,
      `proxy:\n  bridge: ${bridge}\n  ports: { health: ${healthPort} }\n`,
    );
    const ca = await loadCa(`${home.stateDir}/ca`);
    const registry = new ClientRegistry(incusSource(incus), { now: Date.now, minRefreshMs: 200 });
    await registry.start();
    const perm = contextFrom((k) => home.env[k], {
      cwd: home.dir,
      uid: Deno.uid() ?? 0,
      programDir: ROOT,
      execPath: Deno.execPath(),
      socket: LIVE_SOCKET,
    });
    const ctx = {
      prog: "isx",
      global: { socket: LIVE_SOCKET },
      perm,
      env: { DENO_DIR: home.env.DENO_DIR! },
    } as unknown as CliContext;
    const policy = new Policy(
      parseCredentials(`anthropic: { accounts: { main: { api_key: ${KEY} } } }\n`),
      { domains: [MCP_HOST] },
    );
    const proxy = await startProxy({
      listen: {
        tls: { hostname: gateway, port: 443 },
        forward: { hostname: gateway, port: 3128 },
        health: [{ hostname: "127.0.0.1", port: healthPort }],
      },
      policy,
      ca,
      clients: registry,
      upstreamOverrides: { "api.anthropic.com": mock.origin },
      allowLoopbackTargets: true,
      mcp: { spec: mcpChildSpec(ctx) },
    });
    try {
      // only this bridge's guests: the endpoint and the API the coordinator's Claude calls
      await applyDns(incus, bridge, { names: [MCP_HOST, "api.anthropic.com"], gateway });
      const coord = testName("coordf");
      made.push(coord);
      const src = (await incus.getInstance(AGENTS_TEMPLATE)).value;
      const address = pickAddress(
        await bridgeCidr(incus, bridge),
        await takenAddresses(incus, bridge),
      );
      const secret = InstanceSecret.generate();
      await incus.createInstance({
        name: coord,
        source: { type: "copy", source: AGENTS_TEMPLATE, instance_only: true },
        config: copyConfig(src.config, {
          type: "instance",
          profile: AGENTS_TEMPLATE,
          trusted: "true",
          "build-id": "live-test",
          "static-ip": address,
          "instance-secret-sha256": secret.sha256,
          "mcp-caller": newGrant(),
        }),
        devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: bridge }, address) },
      }, { step: `copy ${AGENTS_TEMPLATE} to ${coord}` });
      await retargetGuestProxy(incus, coord, gateway);
      await incus.startInstance(coord, { step: `start ${coord}` });
      await Promise.all([deliverSecret(incus, coord, secret), addressOf(incus, coord)]);
      const reg = await reconcileMcpClients(incus, coord, true);
      assert.equal(reg.claude, "registered", JSON.stringify(reg));
      await incus.pushFile(coord, CA_PATH, ca.certPem, { step: "push CA", mode: 0o644 });
      const t = await execRecorded(incus, coord, [
        "bash",
        "-c",
        `update-ca-certificates >/dev/null 2>&1; for i in $(seq 120); do getent hosts ${MCP_HOST} | grep -q ${gateway} && exit 0; sleep 0.5; done; exit 1`,
      ], { step: "trust the CA, resolve the endpoint" });
      assert.equal(t.exitCode, 0, t.stdout + t.stderr);
      await registry.refresh();
      const run = await execRecorded(incus, coord, [
        "bash",
        "-lc",
        "cd ~ && claude -p 'MOCK_MCP_FLOW go' --permission-mode bypassPermissions 2>&1",
      ], {
        step: "the coordinator's claude -p",
        user: AGENT,
        env: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", ENABLE_TOOL_SEARCH: "false" },
        deadlineMs: 900_000,
      });
      const names = seen.map((s) => String(s.name).replace("mcp__isx__", ""));
      assert.match(run.stdout, /MOCK_FLOW_DONE diff has hello-flow/, `${run.stdout}\n${names}`);
      assert.deepEqual(
        [...new Set(names)],
        ["create_instance", "delegate", "wait_any", "get_diff", "destroy_instance"],
      );
      // every model call of the coordinator carried the proxy's key, never a guest's
      for (const r of mock.modelCalls()) assert.equal(r.headers["x-api-key"], KEY);
      const worker = String((seen[1]!.input as Obj).instance);
      assert.ok(!(await incus.listInstances()).some((i) => i.name === worker), "destroyed");
      const log = Deno.readTextFileSync(`${home.stateDir}/mcp/mcp.log`);
      for (const tool of ["create_instance", "delegate", "get_diff", "destroy_instance"]) {
        assert.match(log, new RegExp(`session=instance:${coord}:[0-9a-f]{32} tool=${tool}`));
      }
      void readStamps;
    } finally {
      await lab?.[Symbol.asyncDispose]().catch(() => {});
      await proxy.close().catch(() => {});
      await registry.close();
      await mock.close();
      for (const i of await incus.listInstances()) {
        if (readStamps(i.config)["mcp-owner"]?.endsWith(`:${home.stateDir}`)) made.push(i.name);
      }
      for (const n of made) await removeInstance(incus, n).catch(() => {});
      // a just-deleted instance may hold the bridge a moment longer
      for (let i = 0; i < 30; i++) {
        const gone = await incus.deleteNetwork(bridge, { step: `delete ${bridge}` }).then(
          () => true,
          (e) => hasCode(e, "not_found"),
        );
        if (gone) break;
        await new Promise((r) => setTimeout(r, 1000));
      }
      incus.close();
    }
  },
});
