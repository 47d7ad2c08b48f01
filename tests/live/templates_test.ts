/**
 * Templates and instances against a real incusd: a two-level chain built from the local
 * base image through `isx build`, branched with `isx branch`, then checked from the host
 * through the Incus client (the CLI is used only to build and branch, as a person would).
 * One chain serves every step, because a root build costs most of a minute.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  LIVE_BRIDGE,
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  testName,
} from "../helpers/live.ts";
import { IsxHome } from "../templates_env.ts";
import { programArgs } from "../helpers/spawn.ts";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import {
  execRecorded,
  GUEST_SECRET_PATH,
  readStamps,
  SLOW_DAEMON_MS,
  STAMP,
  startIsxInstance,
  stopIsxInstance,
} from "../../mcp/mod.ts";
import { ensureCa, loadCa } from "../../proxy/mod.ts";
import { bridgeExists, proxyOnlyChecks, removeBridgeIfMade } from "./_proxy_only.ts";

const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };
const NOBODY = { uid: 65534, gid: 65534, home: "/", name: "nobody" };

async function sh(
  c: IncusClient,
  name: string,
  script: string,
  user = { uid: 0, gid: 0, home: "/root", name: "root" },
) {
  return await execRecorded(c, name, ["sh", "-c", script], { step: "test", user });
}

async function destroyAll(c: IncusClient, prefix: string): Promise<void> {
  for (const i of await c.listInstances()) {
    if (!i.name.startsWith(prefix)) continue;
    await c.stopInstance(i.name, { step: "cleanup", force: true }).catch(() => {});
    await c.deleteInstance(i.name, { step: "cleanup" }).catch(() => {});
  }
}

Deno.test({
  name:
    "isx build and branch: a two-level chain, its branches, secrets, network modes and rebuilds",
  ignore: NO_INCUS,
  async fn(t) {
    const p = testName("tpl");
    const [root, leaf, bad] = [`${p}-root`, `${p}-leaf`, `${p}-bad`];
    const real = `sk-ant-api03-REAL${crypto.randomUUID().replaceAll("-", "")}`;
    await using home = new IsxHome();
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const bridgeExisted = await bridgeExists(c);
    try {
      await ensureCa(`${home.stateDir}/ca`); // what isx init makes (tested in tests/templates_cli_test.ts)
      Deno.mkdirSync(home.configDir, { recursive: true });
      Deno.writeTextFileSync(
        `${home.configDir}/credentials.yaml`,
        `anthropic:\n  accounts:\n    me: { api_key: ${real} }\n`,
      );
      home.define(
        "templates",
        root,
        `image: ${LIVE_IMAGE}\nfiles:\n  - path: /etc/isx-test/root.txt\n    content: "from root\\n"\n`,
      );
      home.define(
        "templates",
        leaf,
        `parent: ${root}\nrun: echo v1 > /etc/isx-test/leaf.txt\nenv: { LEAF: "yes" }\n`,
      );

      const built = await t.step(
        "isx build builds the missing parent first, then the leaf, and stamps both",
        async () => {
          const r = await home.isx(["build", "-q", leaf]);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          assert.match(
            r.stdout,
            new RegExp(`Building: ${root} \\(missing\\), ${leaf} \\(missing\\)`),
          );
          const s = readStamps((await c.getInstance(leaf)).value.config);
          const rs = readStamps((await c.getInstance(root)).value.config);
          assert.equal(s[STAMP.type], "base");
          assert.equal(s[STAMP.parent], root);
          assert.equal(s[STAMP.parentBuild], rs[STAMP.buildId]);
          assert.match(s[STAMP.definitionHash]!, /^[0-9a-f]{64}$/);
          assert.equal((await c.getInstanceState(leaf)).status, "Stopped");
        },
      );

      const inst = `${p}-i1`;
      if (!built) return; // every later step needs the chain
      const branched = await t.step("isx branch makes a running copy with an address", async () => {
        const r = await home.isx(["branch", inst, "--from", leaf, "--json", "--no-preflight"]);
        assert.equal(r.code, 0, r.stderr);
        const out = JSON.parse(r.stdout);
        assert.match(out.ip, /^10\.|^\d+\.\d+\.\d+\.\d+$/);
        const s = readStamps((await c.getInstance(inst)).value.config);
        assert.equal(s[STAMP.type], "instance");
        assert.equal(s[STAMP.profile], leaf);
        assert.equal(s[STAMP.definitionHash], undefined, "template stamps are not copied");
      });

      if (!branched) return;
      await t.step(
        "the branch has its parents' files, agentuser with sudo and the placeholders",
        async () => {
          const r = await sh(
            c,
            inst,
            "cat /etc/isx-test/root.txt /etc/isx-test/leaf.txt; id -u agentuser",
          );
          assert.equal(r.stdout, "from root\nv1\n1000\n");
          const env = await execRecorded(c, inst, [
            "bash",
            "-lc",
            "echo $ANTHROPIC_API_KEY $GH_TOKEN $LEAF; sudo -n true && echo sudo",
          ], {
            step: "test",
            user: AGENT,
          });
          assert.equal(env.stdout, "sk-ant-placeholder gho_placeholder yes\nsudo\n");
        },
      );

      await t.step("no real credential is anywhere on the branch's disk", async () => {
        const r = await sh(
          c,
          inst,
          `grep -rIl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e "${
            real.slice(0, 30)
          }" / ; echo "exit=$?"`,
        );
        assert.match(r.stdout, /exit=1\n$/, r.stdout);
      });

      await t.step(
        "the branch trusts the proxy CA: curl to a host signed by it works without -k",
        async () => {
          const ca = await loadCa(`${home.stateDir}/ca`);
          const leafCert = await ca.issueLeaf(["mock.isx.test"]);
          const gw = (await c.getNetwork(LIVE_BRIDGE)).value.config["ipv4.address"]!.split("/")[0]!;
          const ac = new AbortController();
          const server = Deno.serve({
            hostname: gw,
            port: 0,
            cert: leafCert.certPem,
            key: leafCert.keyPem,
            signal: ac.signal,
            onListen: () => {},
          }, () => new Response("trusted\n"));
          try {
            const port = server.addr.port;
            const r = await sh(
              c,
              inst,
              // straight to the server (the guest's HTTPS_PROXY names the lab gateway's 3128)
              `curl -sS --noproxy '*' --max-time 10 --resolve mock.isx.test:${port}:${gw} https://mock.isx.test:${port}/`,
            );
            assert.equal(r.stdout, "trusted\n", r.stderr);
          } finally {
            ac.abort();
            await server.finished;
          }
        },
      );

      await t.step(
        "the instance secret is agentuser's only and changes on every start",
        async () => {
          const read = async () => (await sh(c, inst, `cat ${GUEST_SECRET_PATH}`)).stdout;
          const s1 = await read();
          assert.match(s1, /^[0-9a-f]{64}$/);
          const stamp = () =>
            c.getInstance(inst).then((i) => readStamps(i.value.config)[STAMP.secretHash]);
          assert.equal(await stamp(), createHash("sha256").update(s1).digest("hex"));
          assert.equal((await sh(c, inst, `cat ${GUEST_SECRET_PATH}`, AGENT)).stdout, s1);
          const other = await sh(c, inst, `cat ${GUEST_SECRET_PATH}`, NOBODY);
          assert.notEqual(other.exitCode, 0);
          assert.equal(other.stdout, "");
          await stopIsxInstance(c, inst);
          await startIsxInstance(c, inst);
          const s2 = await read();
          assert.notEqual(s2, s1);
          assert.equal(await stamp(), createHash("sha256").update(s2).digest("hex"));
        },
      );

      await t.step(
        "isx shell opens a login shell as agentuser in the workdir, through a real terminal",
        async () => {
          const session = `${p}-tmux`;
          const args = programArgs(["shell", "--no-preflight", inst], {
            env: home.env,
            cwd: home.root,
          });
          const envArgs = Object.entries(home.env).map(([k, v]) => `${k}=${v}`);
          const tmux = (...a: string[]) =>
            new Deno.Command("tmux", { args: a, stdout: "piped", stderr: "piped" }).output();
          await tmux(
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "120",
            "-y",
            "30",
            "-c",
            home.root,
            // the pane outlives isx and shows its exit status (argv, never a shell string)
            "env",
            ...envArgs,
            "sh",
            "-c",
            '"$@"; echo "[isx exited $?]"; sleep 600',
            "sh",
            Deno.execPath(),
            ...args,
          );
          try {
            const pane = async () =>
              new TextDecoder().decode((await tmux("capture-pane", "-p", "-t", session)).stdout);
            const until = async (re: RegExp) => {
              const end = Date.now() + 180_000;
              while (Date.now() < end) {
                const text = await pane();
                if (re.test(text)) return text;
                if (/\[isx exited \d+\]/.test(text)) break; // it is over: say what it printed
                await new Promise((r) => setTimeout(r, 200));
              }
              throw new assert.AssertionError({ message: `no ${re} in:\n${await pane()}` });
            };
            await until(/agentuser@/);
            await tmux(
              "send-keys",
              "-t",
              session,
              'echo "ME=$(id -un) AT=$PWD KEY=$ANTHROPIC_API_KEY"',
              "Enter",
            );
            await until(/ME=agentuser AT=\/home\/agentuser KEY=sk-ant-placeholder/);
            const title = new TextDecoder().decode(
              (await tmux("display-message", "-p", "-t", session, "#{pane_title}")).stdout,
            );
            assert.equal(title.trim(), `isx: ${inst}`);
            await tmux("send-keys", "-t", session, "exit", "Enter");
            await until(/\[isx exited 0\]/); // the shell ended and isx exited with it
          } finally {
            await tmux("kill-session", "-t", session);
          }
        },
      );

      await t.step("a second branch gets its own machine id and address", async () => {
        const r = await home.isx(["branch", `${p}-i2`, "--from", leaf, "--json", "--no-preflight"]);
        assert.equal(r.code, 0, r.stderr);
        const ip2 = JSON.parse(r.stdout).ip;
        const st = await c.getInstanceState(inst);
        const ip1 = st.network?.eth0?.addresses.find((a) => a.family === "inet")?.address;
        assert.notEqual(ip2, ip1);
        const ids = await Promise.all(
          [inst, `${p}-i2`].map((n) => sh(c, n, "cat /etc/machine-id")),
        );
        assert.notEqual(ids[0]!.stdout, ids[1]!.stdout);
      });

      await t.step("an airgapped branch has no network device", async () => {
        const r = await home.isx([
          "branch",
          `${p}-air`,
          "--from",
          leaf,
          "--network",
          "airgap",
          "--no-preflight",
        ]);
        assert.equal(r.code, 0, r.stderr);
        const links = await sh(c, `${p}-air`, "ls /sys/class/net");
        assert.equal(links.stdout.trim(), "lo");
      });

      await t.step("a proxy-only branch cannot reach a non-proxy address", async () => {
        await proxyOnlyChecks(c, { home, leaf, full: inst, name: `${p}-po`, peer: `${p}-po2` });
      });

      await t.step(
        "--out-of-sync rebuilds exactly what changed, and everything under it",
        async () => {
          const before = async (n: string) =>
            readStamps((await c.getInstance(n)).value.config)[STAMP.buildId];
          const [r0, l0] = [await before(root), await before(leaf)];
          home.define(
            "templates",
            leaf,
            `parent: ${root}\nrun: echo v2 > /etc/isx-test/leaf.txt\nenv: { LEAF: "yes" }\n`,
          );
          let r = await home.isx(["build", "-q", "--out-of-sync", leaf]);
          assert.equal(r.code, 0, r.stderr);
          assert.match(r.stdout, new RegExp(`Building: ${leaf} \\(changed\\)\n`));
          assert.equal(await before(root), r0);
          const l1 = await before(leaf);
          assert.notEqual(l1, l0);
          r = await home.isx(["build", "-q", "--out-of-sync", leaf]);
          assert.match(r.stdout, /Nothing to build/);
        },
      );

      await t.step("a build that fails keeps its instance and says how to reach it", async () => {
        home.define("templates", bad, `parent: ${root}\nrun: "echo failing on purpose; exit 3"\n`);
        const r = await home.isx(["build", "-q", bad]);
        assert.equal(r.code, 1);
        assert.match(
          r.stderr,
          new RegExp(`"${bad}-build" is kept for inspection: isx shell ${bad}-build`),
        );
        assert.match(r.stderr, /exited with 3/);
        assert.equal((await c.getInstanceState(`${bad}-build`)).status, "Running");
      });

      await t.step("isx list shows the templates and instances", async () => {
        const r = await home.isx(["list", "--json"]);
        const rows = JSON.parse(r.stdout) as { name: string; kind: string }[];
        const mine = rows.filter((x) => x.name.startsWith(p));
        assert.ok(mine.some((x) => x.name === leaf && x.kind === "template"));
        assert.ok(mine.some((x) => x.name === inst && x.kind === "instance"));
        assert.ok(mine.some((x) => x.name === `${bad}-build` && x.kind === "build"));
      });
    } finally {
      await destroyAll(c, p);
      await removeBridgeIfMade(c, bridgeExisted);
      c.close();
    }
  },
});
