/**
 * A new user's first hour (issue 12), against a real incusd and real processes: `isx init
 * --yes` then `isx proxy start` on the skeleton init wrote; `isx proxy status`; the
 * preflight refusing a branch while the proxy is down, after a config edit and across a
 * version change (`--no-preflight` for people who know); and a template built under
 * another isx home (another CA; made by hand as isx build would leave it, without the apt
 * step), whose instances' TLS calls fail until `isx start` or `isx branch` repairs their
 * trust store, with `isx list` marking the template.
 *
 * The proxy listens on random ports with `dns: false`, so the bridge's DNS (and any other
 * proxy on this host) is never touched.
 */

import assert from "node:assert/strict";
import {
  LAB,
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { LAB_PREFIX, labProxyYaml } from "../helpers/lab.ts";
import { IsxHome } from "../templates_env.ts";
import { createIncusClient, type IncusClient, isNotFound } from "../../rpc/mod.ts";
import {
  execRecorded,
  GUEST_CA_PATH,
  readStamps,
  repairGuestCa,
  SLOW_DAEMON_MS,
  STAMP,
  stampConfig,
  stopReliably,
  waitForRun,
} from "../../mcp/mod.ts";
import { ensureCa } from "../../proxy/mod.ts";
import { certFingerprint, createCa } from "../../proxy/tls/ca.ts";
import { bootMethod } from "../../cli/proxy_install.ts";

/** Runs openssl's TLS handshake from the guest to the proxy, verifying with its trust store. */
async function tlsVerify(c: IncusClient, name: string, tls: string): Promise<string> {
  const r = await execRecorded(c, name, [
    "sh",
    "-c",
    'openssl s_client -connect "$1" -servername api.anthropic.com -verify_return_error ' +
    "</dev/null 2>&1 | grep -E 'Verify return code|verify error' | head -1",
    "sh",
    tls,
  ], { step: "tls check" });
  return r.stdout.trim();
}

async function exists(c: IncusClient, name: string): Promise<boolean> {
  try {
    await c.getInstance(name);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

Deno.test({
  name: "first hour: init, proxy start on the skeleton, preflight refusals and CA repair",
  ignore: NO_INCUS,
  async fn(t) {
    const p = testName("fh");
    const tpl = `${p}-tpl`;
    const port = () => 20000 + Math.floor(Math.random() * 20000);
    const ports = { tls: port(), forward: port(), health: port() };
    await using home = new IsxHome({ config: false }); // isx init writes it
    await using other = new IsxHome();
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const made: string[] = [];
    const isx = async (args: string[], code: number) => {
      const r = await home.isx(args);
      assert.equal(r.code, code, `isx ${args.join(" ")}: ${r.stdout}${r.stderr}`);
      return r;
    };
    try {
      let tls = "";
      await t.step(
        "isx init --yes, then isx proxy start runs and names what has no credential",
        async () => {
          await isx(["init", "--yes"], 0);
          const cfg = `${home.configDir}/config.yaml`;
          const text = Deno.readTextFileSync(cfg);
          assert.ok(text.includes("\n  bridge: incusbr0\n"), text);
          // the lab's bridges, not the user's (whose gateway and nft tables their proxy has)
          Deno.writeTextFileSync(
            cfg,
            text.replace(
              "\n  bridge: incusbr0\n",
              `\n  bridge: ${LAB.bridge}\n  proxy_only_bridge: ${LAB.proxyOnlyBridge}\n  dns: false\n  ports: { tls: ${ports.tls}, forward: ${ports.forward}, health: ${ports.health} }\n`,
            ),
          );
          const creds = Deno.readTextFileSync(`${home.configDir}/credentials.yaml`);
          assert.ok(creds.split("\n").every((l) => l === "" || l.startsWith("#")), creds);
          const down = await isx(["proxy", "status"], 1);
          assert.match(down.stdout, /^not_running: isx proxy start/);
          const started = await isx(["proxy", "start"], 0);
          assert.match(started.stdout, /no credential yet for: anthropic, openai, github/);
          const st = JSON.parse((await isx(["proxy", "status", "--json"], 0)).stdout);
          assert.equal(st.status, "running");
          assert.deepEqual(st.health.missingCredentials, ["anthropic", "openai", "github"]);
          assert.equal(st.health.configDrifted, false);
          assert.equal(st.health.authError, null);
          assert.equal(st.drift.kind, "none");
          tls = st.health.listen.tls;
          const text2 = (await isx(["proxy", "status"], 0)).stdout;
          assert.match(text2, /^running \(pid \d+/);
          assert.match(text2, /no credential yet for: anthropic, openai, github/);
          const dump = JSON.parse((await isx(["proxy", "dump"], 0)).stdout);
          assert.equal(dump.config.ports.tls, ports.tls);
          assert.deepEqual(dump.credentials.anthropic.accounts, {});
        },
      );

      await t.step("a template built under another isx home (another CA)", async () => {
        // what isx build leaves, made by hand to spare the apt step: agentuser, the other
        // home's CA trusted, stopped and stamped as a template of that CA
        const ca = await ensureCa(`${other.stateDir}/ca`);
        made.push(tpl);
        await c.createInstance({
          name: tpl,
          type: "container",
          source: { type: "image", alias: LIVE_IMAGE },
          start: true,
        }, { step: `create ${tpl}` });
        await waitForRun(c, tpl);
        await c.pushFile(tpl, GUEST_CA_PATH, ca.certPem, {
          step: "CA",
          uid: 0,
          gid: 0,
          mode: 0o644,
        });
        const setup = await execRecorded(c, tpl, [
          "sh",
          "-c",
          "useradd -m -u 1000 -U -s /bin/bash agentuser && update-ca-certificates >/dev/null",
        ], { step: "set up the template", env: { TMPDIR: "/var/tmp" } });
        assert.equal(setup.exitCode, 0, setup.stderr);
        await stopReliably(c, tpl, { force: true });
        await c.updateInstance(tpl, (i) => {
          i.config = {
            ...i.config,
            ...stampConfig({
              [STAMP.type]: "base",
              [STAMP.profile]: tpl,
              [STAMP.workdir]: "/home/agentuser",
              [STAMP.trusted]: "true",
              [STAMP.caFingerprint]: ca.fingerprint,
            }),
          };
        }, { step: `stamp ${tpl}` });
        const ours = JSON.parse((await isx(["proxy", "status", "--json"], 0)).stdout).health
          .caFingerprint;
        assert.notEqual(ca.fingerprint, ours);
        assert.equal(
          readStamps((await c.getInstance(tpl)).value.config)[STAMP.caFingerprint],
          ca.fingerprint,
        );
      });

      const loose = `${p}-loose`;
      await t.step(
        "with the proxy stopped, a branch is refused with the fix; --no-preflight passes",
        async () => {
          await isx(["proxy", "stop"], 0);
          const refused = await isx(["branch", loose, "--from", tpl], 7);
          assert.match(
            refused.stderr,
            /the proxy does not answer .*: isx proxy start \(or --no-preflight\)/,
          );
          assert.equal(await exists(c, loose), false, "a refused branch makes nothing");
          made.push(loose);
          await isx(["branch", loose, "--from", tpl, "--no-preflight"], 0);
          assert.equal(await exists(c, loose), true);
        },
      );

      await t.step(
        "an instance trusting another CA fails TLS until isx start repairs it",
        async () => {
          await isx(["proxy", "start"], 0);
          assert.match(await tlsVerify(c, loose, tls), /verify error|Verify return code: 19/);
          await isx(["stop", loose], 0);
          const r = await isx(["start", loose], 0);
          assert.match(r.stderr, /its trust store now holds the one the proxy serves/);
          assert.equal(await tlsVerify(c, loose, tls), "Verify return code: 0 (ok)");
          await isx(["stop", loose], 0);
          const again = await isx(["start", loose], 0);
          assert.doesNotMatch(again.stderr, /trust store/, "a repaired instance needs no repair");
        },
      );

      await t.step(
        "isx branch repairs a fresh copy; isx list marks the template out of date",
        async () => {
          const fresh = `${p}-fresh`;
          made.push(fresh);
          const r = await isx(["branch", fresh, "--from", tpl], 0);
          assert.match(
            r.stderr,
            new RegExp(`${tpl} still trusts its build-time CA: isx build ${tpl}`),
          );
          assert.equal(await tlsVerify(c, fresh, tls), "Verify return code: 0 (ok)");
          const rows = JSON.parse((await isx(["list", "--json"], 0)).stdout) as {
            name: string;
            ca_outdated: boolean | null;
          }[];
          const by = (n: string) => rows.find((x) => x.name === n)?.ca_outdated;
          assert.equal(by(tpl), true);
          assert.equal(by(fresh), false);
          assert.equal(by(loose), false);
          assert.match(
            (await isx(["list"], 0)).stdout,
            new RegExp(`out of date: isx build ${tpl}`),
          );
        },
      );

      await t.step(
        "a config edit or another build of isx refuses until isx proxy restart",
        async () => {
          // a credentials edit is the proxy's to reload (issue 23): never a refusal; a
          // restart-only part of config.yaml (its limits) is
          const creds = `${home.configDir}/credentials.yaml`;
          Deno.writeTextFileSync(creds, Deno.readTextFileSync(creds) + "# edited\n");
          const cfg = `${home.configDir}/config.yaml`;
          Deno.writeTextFileSync(
            cfg,
            Deno.readTextFileSync(cfg).replace(
              "\n  dns: false\n",
              "\n  dns: false\n  limits: { connections_per_instance: 100 }\n",
            ),
          );
          const st = await isx(["proxy", "status"], 0);
          assert.match(st.stdout, /changed since start: .*config\.yaml.*: isx proxy restart/);
          const refused = await isx(["branch", `${p}-x`, "--from", tpl], 7);
          assert.match(
            refused.stderr,
            /config\.yaml changed since the proxy started.*isx proxy restart/,
          );
          assert.doesNotMatch(refused.stderr, /credentials\.yaml/);
          home.env.ISX_GIT_SHA = "a".repeat(40);
          await isx(["proxy", "restart"], 0);
          home.env.ISX_GIT_SHA = "b".repeat(40);
          const drift = await isx(["branch", `${p}-x`, "--from", tpl], 7);
          assert.match(drift.stderr, /aaaaaaaaaaaa.*bbbbbbbbbbbb.*isx proxy restart/);
          const js = JSON.parse((await isx(["proxy", "status", "--json"], 0)).stdout);
          assert.equal(js.drift.kind, "restart");
          assert.equal(await exists(c, `${p}-x`), false);
          const shell = await isx(["shell", loose], 7);
          assert.match(shell.stderr, /open a shell in .*isx proxy restart \(or --no-preflight\)/);
          // a credentials file made readable by others: the proxy says so, never the values
          Deno.chmodSync(creds, 0o644);
          const auth = JSON.parse((await isx(["proxy", "status", "--json"], 0)).stdout);
          assert.match(auth.health.authError, /mode 0644 is wider than 0600/);
        },
      );
    } finally {
      await home.isx(["proxy", "stop"]).catch(() => {});
      for (const n of made.reverse()) await removeInstance(c, n);
      c.close();
    }
  },
});

const BOOT = await bootMethod();

Deno.test({
  name: "isx proxy install without systemd or cron writes a boot script that starts the proxy",
  ignore: NO_INCUS || BOOT !== "none",
  async fn() {
    await using home = new IsxHome();
    const port = () => 20000 + Math.floor(Math.random() * 20000);
    const ports = { tls: port(), forward: port(), health: port() };
    Deno.mkdirSync(home.configDir, { recursive: true });
    Deno.writeTextFileSync(
      `${home.configDir}/config.yaml`,
      labProxyYaml(LAB, ports, "  dns: false\n"),
    );
    const script = `${home.stateDir}/proxy/boot.sh`;
    try {
      const r = await home.isx(["proxy", "install"]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /neither systemd nor cron/);
      assert.equal(Deno.statSync(script).mode! & 0o777, 0o700);
      // what the host's boot would do: run the script, then the proxy answers
      // with only what a boot has (no XDG variables): the script carries its directories
      const boot = await new Deno.Command("sh", {
        args: [script],
        clearEnv: true,
        env: { PATH: "/usr/bin:/bin", DENO_DIR: home.env.DENO_DIR! },
      }).output();
      assert.equal(boot.code, 0, new TextDecoder().decode(boot.stderr));
      const st = JSON.parse((await home.isx(["proxy", "status", "--json"])).stdout);
      assert.equal(st.status, "running");
      const un = await home.isx(["proxy", "uninstall"]);
      assert.match(un.stdout, /removed .*boot\.sh/);
      assert.throws(() => Deno.statSync(script));
    } finally {
      await home.isx(["proxy", "stop"]);
      // the boot script also started this home's warm-pool keeper in the background
      await new Deno.Command("pkill", {
        args: ["-TERM", "-f", `${home.stateDir}.* pool keep`],
      }).output().catch(() => {});
    }
  },
});

Deno.test({
  name: "isx proxy status: running, waiting_for_dns, stale_dns, not_running, stale_gateway",
  ignore: NO_INCUS,
  async fn(t) {
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const bridge = `${LAB_PREFIX}f${LAB.id}`; // a test-made name (tests/helpers/lab.ts)
    const used = new Set(
      (await c.call("GET", "/1.0/networks", { query: { recursion: 1 } }).then((r) =>
        r.kind === "sync" ? r.metadata as { config?: Record<string, string> }[] : []
      )).map((n) => n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")),
    );
    const subnet = () => {
      for (;;) {
        const s = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
        if (!used.has(s)) {
          used.add(s);
          return s;
        }
      }
    };
    const first = subnet();
    await c.createNetwork({
      name: bridge,
      config: { "ipv4.address": `${first}.1/24`, "ipv4.nat": "false", "ipv6.address": "none" },
    }, { step: `create ${bridge}` });
    await using home = new IsxHome();
    const port = () => 20000 + Math.floor(Math.random() * 20000);
    Deno.mkdirSync(home.configDir, { recursive: true });
    Deno.writeTextFileSync(
      `${home.configDir}/config.yaml`,
      `proxy:\n  bridge: ${bridge}\n  proxy_only_bridge: ${LAB.proxyOnlyBridge}\n  ports: { tls: ${port()}, forward: ${port()}, health: ${port()} }\n`,
    );
    const status = async (want: string, code: number) => {
      const r = await home.isx(["proxy", "status", "--json"]);
      const s = JSON.parse(r.stdout);
      assert.equal(s.status, want, r.stdout + r.stderr);
      assert.equal(r.code, code);
      return s;
    };
    const dnsmasq = async () => (await c.getNetwork(bridge)).value.config["raw.dnsmasq"] ?? "";
    try {
      await t.step("running: it answers and the bridge DNS points at it", async () => {
        assert.equal((await home.isx(["proxy", "start"])).code, 0);
        const s = await status("running", 0);
        assert.equal(s.health.dnsConfigured, true);
        assert.match(await dnsmasq(), new RegExp(`address=/api\\.anthropic\\.com/${first}\\.1`));
      });
      await t.step("waiting_for_dns: the block is gone from the bridge", async () => {
        await c.patchNetwork(bridge, { config: { "raw.dnsmasq": "" } }, { step: "clear DNS" });
        const s = await status("waiting_for_dns", 2);
        assert.match(s.why, /does not point at it/);
      });
      await t.step("stale_dns: a proxy that died leaves its block behind", async () => {
        assert.equal((await home.isx(["proxy", "restart"])).code, 0);
        const { pid } = await status("running", 0);
        Deno.kill(pid, "SIGKILL");
        const s = await status("stale_dns", 2);
        assert.match(s.why, new RegExp(`${first}\\.1, where nothing answers`));
      });
      await t.step("not_running: a clean stop takes its block away", async () => {
        assert.equal((await home.isx(["proxy", "start"])).code, 0);
        assert.equal((await home.isx(["proxy", "stop"])).code, 0);
        await status("not_running", 1);
        assert.doesNotMatch(await dnsmasq(), /isx-proxy begin/);
      });
      await t.step("stale_gateway: the bridge was re-addressed under a running proxy", async () => {
        assert.equal((await home.isx(["proxy", "start"])).code, 0);
        const next = subnet();
        await c.patchNetwork(bridge, { config: { "ipv4.address": `${next}.1/24` } }, {
          step: "re-address",
        });
        const s = await status("stale_gateway", 2);
        assert.match(
          s.why,
          new RegExp(`listens on ${first}\\.1, but the gateway is now ${next}\\.1`),
        );
        assert.equal((await home.isx(["proxy", "stop"])).code, 0);
      });
    } finally {
      await home.isx(["proxy", "stop"]);
      await c.deleteNetwork(bridge, { step: `delete ${bridge}` }).catch(() => {});
      c.close();
    }
  },
});

Deno.test({
  name: "CA repair reads no planted giant bundle or linked certificate from the guest",
  ignore: NO_INCUS,
  async fn() {
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const name = testName("fhca");
    const [a, b] = [await createCa(), await createCa()];
    try {
      await c.createInstance({
        name,
        type: "container",
        source: { type: "image", alias: LIVE_IMAGE },
        start: true,
      }, { step: `create ${name}` });
      await waitForRun(c, name);
      await c.pushFile(name, GUEST_CA_PATH, a.certPem, { step: "CA", uid: 0, gid: 0, mode: 0o644 });
      const sh = (script: string) =>
        execRecorded(c, name, ["sh", "-c", script], {
          step: "guest",
          env: { TMPDIR: "/var/tmp" },
        });
      assert.equal((await sh("update-ca-certificates >/dev/null")).exitCode, 0);
      // root in the guest: a 64 MiB bundle and the CA file a link to it
      const plant = await sh(
        "head -c 67108864 /dev/zero > /etc/ssl/certs/ca-certificates.crt && " +
          `ln -sf /etc/ssl/certs/ca-certificates.crt ${GUEST_CA_PATH}`,
      );
      assert.equal(plant.exitCode, 0, plant.stderr);
      await repairGuestCa(c, name, {
        pem: b.certPem,
        fingerprint: await certFingerprint(b.certPem),
      });
      // the fallback ran in the guest: a real bundle again, trusting the new CA
      const check = await sh(
        `wc -c < /etc/ssl/certs/ca-certificates.crt; ` +
          `openssl verify -CAfile /etc/ssl/certs/ca-certificates.crt ${GUEST_CA_PATH}`,
      );
      const [size, verdict] = check.stdout.trim().split("\n");
      assert.ok(Number(size) < 4 * 1024 * 1024, `bundle of ${size} bytes`);
      assert.match(verdict ?? "", /: OK$/);
      const stamp = readStamps((await c.getInstance(name)).value.config)[STAMP.caFingerprint];
      assert.equal(stamp, await certFingerprint(b.certPem));
    } finally {
      await removeInstance(c, name);
      c.close();
    }
  },
});
