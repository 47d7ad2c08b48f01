/**
 * `isx proxy restart` converges (issue 19): ten restarts in a row each end `running`, with
 * the bridge's DNS block pointing at the proxy and its nft tables in place. The stop's DNS
 * PATCH restarts dnsmasq and the start's PATCH can race the old one ("failed to create
 * listening socket … Address already in use", HTTP 500): the proxy retries it with backoff
 * (proxy/host/_converge.ts), and `isx proxy start` waits until everything it needs holds.
 *
 * A guest on the user's machine: the proxy has its own isx home, listens on a bridge this
 * test makes (its DNS is the one edited), names its nft tables with its own prefix, and its
 * ops port is a random one; the user's proxy, bridges and nft tables are compared before and
 * after.
 */

import assert from "node:assert/strict";
import { createIncusClient, type IncusClient, isNotFound } from "../../rpc/mod.ts";
import { LIVE_SOCKET, NO_INCUS } from "../helpers/live.ts";
import { IsxHome } from "../templates_env.ts";
import { dnsBlockGateway } from "../../proxy/mod.ts";
import { nftTables } from "../../proxy/config/host_config.ts";

const hex = () => crypto.randomUUID().replaceAll("-", "").slice(0, 6);

/** `nft list table <family> <name>`, or "" when there is none. */
async function nftTable(family: string, name: string): Promise<string> {
  const out = await new Deno.Command("nft", {
    args: ["list", "table", family, name],
    stdout: "piped",
    stderr: "null",
  }).output();
  return out.success ? new TextDecoder().decode(out.stdout) : "";
}

/** A /24 in 10.79.0.0/16 that no bridge holds (the test's own). */
async function freeSubnet(c: IncusClient): Promise<string> {
  const used = new Set(
    (await c.listNetworks()).map((n) =>
      n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")
    ),
  );
  for (let i = 0; i < 50; i++) {
    const s = `10.79.${1 + Math.floor(Math.random() * 250)}`;
    if (!used.has(s)) return s;
  }
  throw new Error("no free /24 in 10.79.0.0/16");
}

/**
 * The user's side this test must leave alone: the default bridge's DNS (only a restart of the
 * user's proxy changes it) and the user's proxy's nft tables (their presence, and the
 * connection limit's rules, written once at its start).
 */
async function userSide(c: IncusClient) {
  const dns = await c.getNetwork("incusbr0").then(
    (n) => n.value.config["raw.dnsmasq"] ?? "",
    () => undefined,
  );
  return {
    dns,
    guard: (await nftTable("bridge", "isx_guard")) !== "",
    connlimit: await nftTable("inet", "isx_connlimit"),
  };
}

Deno.test({
  name: "isx proxy restart ten times in a row ends running ten times, DNS and nft tables held",
  ignore: NO_INCUS,
  async fn() {
    const c = createIncusClient({ socket: LIVE_SOCKET });
    const id = hex();
    const bridge = `ihost${id}`;
    const prefix = `ihost_${id}`;
    const tables = nftTables(bridge, prefix);
    await using home = new IsxHome();
    const healthPort = 20000 + Math.floor(Math.random() * 20000);
    let made = false;
    const before = await userSide(c);
    try {
      const net = await freeSubnet(c);
      await c.createNetwork({
        name: bridge,
        type: "bridge",
        config: {
          "ipv4.address": `${net}.1/24`,
          "ipv4.nat": "false",
          "ipv6.address": "none",
          "user.isx.test": "i-host proxy_restart_test",
        },
      }, { step: `create bridge ${bridge}` });
      made = true;
      const gateway = `${net}.1`;
      await Deno.mkdir(home.configDir, { recursive: true });
      await Deno.writeTextFile(
        `${home.configDir}/config.yaml`,
        [
          "proxy:",
          `  bridge: ${bridge}`,
          `  proxy_only_bridge: ihostp${id}`,
          `  nft_prefix: ${prefix}`,
          `  ports: { tls: 443, forward: 3128, health: ${healthPort} }`,
          "  dns: true",
          "",
        ].join("\n"),
      );
      const isx = async (args: string[]) => {
        const r = await home.isx(args, { timeoutMs: 120_000 });
        return { ...r, all: `isx ${args.join(" ")} (${r.code}): ${r.stdout}${r.stderr}` };
      };
      const started = await isx(["proxy", "start"]);
      assert.equal(started.code, 0, started.all);
      const seen: string[] = [];
      for (let i = 1; i <= 10; i++) {
        const r = await isx(["proxy", "restart"]);
        const st = await isx(["proxy", "status", "--json"]);
        const s = JSON.parse(st.stdout || "{}");
        seen.push(`${i}: restart ${r.code}, status ${s.status} ${s.why ?? ""}`);
        assert.equal(r.code, 0, `${seen.join("\n")}\n${r.all}`);
        assert.equal(s.status, "running", `${seen.join("\n")}\n${st.all}`);
        assert.deepEqual(s.health.converging, [], st.all);
        const raw = (await c.getNetwork(bridge)).value.config["raw.dnsmasq"] ?? "";
        assert.equal(dnsBlockGateway(raw), gateway, `restart ${i}: the bridge DNS: ${raw}`);
        assert.ok((await nftTable("inet", tables.connLimit)).includes("ct count over"));
        assert.ok((await nftTable("bridge", tables.guard)) !== "", `restart ${i}: guard`);
      }
      const log = await Deno.readTextFile(`${home.stateDir}/proxy/proxy.log`);
      const count = (re: RegExp) => log.split("\n").filter((l) => re.test(l)).length;
      // deno-lint-ignore no-console
      console.log(
        `10 restarts: ${count(/does not hold yet/)} failed attempts retried, ` +
          `${count(/waiting for the previous proxy/)} starts waited for the old proxy's cleanup`,
      );
      const stopped = await isx(["proxy", "stop"]);
      assert.equal(stopped.code, 0, stopped.all);
      // a clean stop takes its block and its tables away
      const raw = (await c.getNetwork(bridge)).value.config["raw.dnsmasq"] ?? "";
      assert.equal(dnsBlockGateway(raw), undefined, raw);
      assert.equal(await nftTable("inet", tables.connLimit), "");
      assert.equal(await nftTable("bridge", tables.guard), "");
      assert.deepEqual(
        await userSide(c),
        before,
        "the user's bridge DNS and nft tables are unchanged",
      );
    } finally {
      await home.isx(["proxy", "stop"], { timeoutMs: 60_000 }).catch(() => {});
      for (const [family, t] of [["inet", tables.connLimit], ["bridge", tables.guard]]) {
        await new Deno.Command("nft", { args: ["delete", "table", family!, t!], stderr: "null" })
          .output();
      }
      if (made) {
        await c.deleteNetwork(bridge, { step: `delete bridge ${bridge}` }).catch((e) => {
          if (!isNotFound(e)) throw e;
        });
      }
      c.close();
    }
  },
});
