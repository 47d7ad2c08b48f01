/**
 * A coordinator's real agent CLIs registered against the endpoint (issue 20, seed 002's own
 * check): a branch of `tpl-agents` made with the grant (as `isx branch --mcp-client` makes
 * it, on this test's own bridge, served by the real proxy in this process with its own CA)
 * has Claude Code and opencode registered on its start, and `claude mcp list` and
 * `opencode mcp list` inside it show isx connected, through the proxy to the real
 * `isx mcp --caller-instance` child. A fork of it loses both registrations on its first start
 * (and the proxy would refuse it anyway: tests/live/mcp_coordinator_test.ts). Needs the built
 * template; without it the test is ignored with a printed reason. Everything is named
 * `t-coorda-…` / `icoorda…` and removed at the end.
 *
 * @module
 */

import { hasCode } from "../../rpc/base.ts";
import assert from "node:assert/strict";
import { copyConfig, execRecorded, readStamps } from "../../mcp/mod.ts";
import {
  deliverSecret,
  InstanceSecret,
  reconcileMcpClients,
  type RegistrationReport,
} from "../../mcp/instances/mod.ts";
import {
  bridgeCidr,
  pickAddress,
  pinnedNic,
  takenAddresses,
} from "../../mcp/instances/static_ip.ts";
import { retargetGuestProxy } from "../../mcp/instances/retarget.ts";
import { addressOf } from "./_pinned.ts";
import { newGrant } from "../../mcp/instances/caller_grant.ts";
import {
  ClientRegistry,
  incusSource,
  loadCa,
  MCP_HOST,
  Policy,
  startProxy,
} from "../../proxy/mod.ts";
import { emptyCredentials } from "../../proxy/config/credentials.ts";
import { applyDns } from "../../proxy/host/dns.ts";
import { contextFrom } from "../../cli/permissions.ts";
import { mcpChildSpec } from "../../cli/mcp_child.ts";
import type { CliContext } from "../../cli/command.ts";
import { LIVE_SOCKET, liveIncus, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { makeHome } from "../helpers/mcp.ts";
import { ROOT } from "../helpers/spawn.ts";
import { AGENTS_TEMPLATE, ensureTemplate } from "../helpers/agents_lab.ts";

const HAVE = !NO_INCUS && await ensureTemplate().then(() => true); // built in this run's lab
const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };
const CA_PATH = "/usr/local/share/ca-certificates/isx-proxy.crt";

Deno.test({
  name: "a coordinator's Claude Code and opencode show isx connected; a fork of it has neither",
  ignore: !HAVE,
  async fn(t) {
    const incus = liveIncus();
    const made: string[] = [];
    const bridge = `icoorda${crypto.randomUUID().slice(0, 5)}`;
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
    const gateway = `${subnet}.1`;
    await incus.createNetwork({
      name: bridge,
      config: { "ipv4.address": `${gateway}/24`, "ipv4.nat": "false", "ipv6.address": "none" },
    }, { step: `create ${bridge}` });
    const home = makeHome({ mcp: `templates: [${AGENTS_TEMPLATE}]\n` });
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
    const policy = new Policy(emptyCredentials(), { domains: [MCP_HOST] });
    // the template's guests send what NO_PROXY does not name through gateway:3128
    const proxy = await startProxy({
      listen: {
        tls: { hostname: gateway, port: 443 },
        forward: { hostname: gateway, port: 3128 },
        health: [{ hostname: "127.0.0.1", port: healthPort }],
      },
      policy,
      ca,
      clients: registry,
      mcp: { spec: mcpChildSpec(ctx) },
    });
    /**
     * A copy of `source` on this test's bridge, started with a fresh secret, as isx branch
     * makes it (stamps of the source unset unless stamped, a pinned NIC), then its agents
     * reconciled as branchInstance does on a start: registered for a coordinator, removed
     * for a copy of one. (isx branch itself keeps a full instance on the template's bridge,
     * the user's; this test stays on its own.)
     */
    const copy = async (
      name: string,
      source: string,
      stamps: Record<string, string>,
    ): Promise<RegistrationReport> => {
      made.push(name);
      const src = (await incus.getInstance(source)).value;
      const address = pickAddress(
        await bridgeCidr(incus, bridge),
        await takenAddresses(incus, bridge),
      );
      const secret = InstanceSecret.generate();
      await incus.createInstance({
        name,
        source: { type: "copy", source, instance_only: true },
        config: copyConfig(src.config, {
          type: "instance",
          profile: AGENTS_TEMPLATE,
          trusted: "true",
          "build-id": "live-test",
          "static-ip": address,
          "instance-secret-sha256": secret.sha256,
          ...stamps,
        }),
        devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: bridge }, address) },
      }, { step: `copy ${source} to ${name}` });
      await retargetGuestProxy(incus, name, gateway);
      await incus.startInstance(name, { step: `start ${name}` });
      await Promise.all([deliverSecret(incus, name, secret), addressOf(incus, name)]);
      const grant = stamps["mcp-caller"];
      return await reconcileMcpClients(incus, name, grant !== undefined);
    };
    const user = (name: string, script: string) =>
      execRecorded(incus, name, ["bash", "-lc", script], { step: "agentuser", user: AGENT });
    const trust = async (name: string) => {
      await incus.pushFile(name, CA_PATH, ca.certPem, { step: "push CA", mode: 0o644 });
      const r = await execRecorded(incus, name, [
        "bash",
        "-c",
        `update-ca-certificates >/dev/null 2>&1; for i in $(seq 120); do getent hosts ${MCP_HOST} | grep -q ${gateway} && exit 0; sleep 0.5; done; exit 1`,
      ], { step: "trust the CA, resolve the endpoint" });
      assert.equal(r.exitCode, 0, r.stdout + r.stderr);
    };
    try {
      await applyDns(incus, bridge, { names: [MCP_HOST], gateway });
      const coord = testName("coorda");
      made.push(coord);
      const r = await copy(coord, AGENTS_TEMPLATE, { "mcp-caller": newGrant() });
      await t.step("its start registered Claude Code and opencode, and said why not Codex", () => {
        assert.equal(r.claude, "registered", JSON.stringify(r));
        assert.equal(r.opencode, "registered", JSON.stringify(r));
        assert.match(r.codex ?? "", /^left: /);
      });
      await trust(coord);
      await registry.refresh();
      await t.step("opencode mcp list shows isx connected", async () => {
        const o = await user(coord, "opencode mcp list 2>&1");
        assert.match(o.stdout, /isx[\s\S]*connected/i, o.stdout + o.stderr);
        assert.doesNotMatch(o.stdout, /isx[^\n]*failed/i, o.stdout);
        const cfg = JSON.parse(
          (await user(coord, "cat ~/.config/opencode/opencode.json")).stdout,
        );
        assert.equal(
          cfg.mcp.isx.headers["X-Isx-Instance-Secret"],
          "{file:/run/isx/instance-secret}",
        );
      });
      await t.step("claude mcp list shows isx connected", async () => {
        const o = await user(coord, "claude mcp list 2>&1");
        assert.match(
          o.stdout,
          /isx: https:\/\/mcp\.isx\.internal\/mcp \(HTTP\) - [✓✔] Connected/,
          o.stdout,
        );
      });
      await t.step(
        "a fork of the coordinator has neither registration after its first start",
        async () => {
          await incus.stopInstance(coord, { step: `stop ${coord}`, force: true });
          const fork = testName("coorda");
          // a copy of the stopped coordinator, stamped as every isx copy (no grant)
          const f = await copy(fork, coord, {});
          assert.equal(f.claude, "removed", JSON.stringify(f));
          assert.equal(f.opencode, "removed", JSON.stringify(f));
          assert.equal(
            readStamps((await incus.getInstance(fork)).value.config)["mcp-caller"] ?? "",
            "",
          );
          const c = await user(fork, "claude mcp list 2>&1; cat ~/.config/opencode/opencode.json");
          assert.doesNotMatch(c.stdout, /mcp\.isx\.internal/, c.stdout);
          const marker = await user(fork, "test -e ~/.config/isx/mcp-client");
          assert.notEqual(marker.exitCode, 0, "the marker went with the registrations");
        },
      );
    } finally {
      await proxy.close().catch(() => {});
      await registry.close();
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
