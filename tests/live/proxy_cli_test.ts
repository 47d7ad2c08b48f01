/**
 * `isx proxy start`, `status`, `activity` and `stop` manage a background proxy through its pid,
 * token and log files, against the real Incus (loopback listeners; bridge DNS management off;
 * the lab's bridge, so its nft tables are not the user's proxy's):
 * the activity listing holds the instance this test created, with no traffic counted.
 */

import { equal, ok } from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import {
  LAB,
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { labProxyYaml } from "../helpers/lab.ts";
import { nftTables } from "../../proxy/config/host_config.ts";
import { spawnProgram } from "../helpers/spawn.ts";

const DENO_DIR = Deno.env.get("DENO_DIR") || `${Deno.env.get("HOME")}/.cache/deno`;

// the limit of a proxy on the lab's bridge: the user's proxy keeps `inet isx_connlimit`
const TABLE = nftTables(LAB.bridge).connLimit;

async function nftTable(): Promise<string> {
  const out = await new Deno.Command("nft", {
    args: ["list", "table", "inet", TABLE],
    stdout: "piped",
    stderr: "null",
  }).output();
  return out.success ? new TextDecoder().decode(out.stdout) : "";
}

async function runIsx(args: string[], env: Record<string, string> = {}) {
  const p = spawnProgram(args, { prog: "isx", env: { DENO_DIR, NO_COLOR: "1", ...env } });
  await p.closeStdin();
  const out: string[] = [];
  for (let l = await p.readLine(60_000); l !== undefined; l = await p.readLine(60_000)) {
    out.push(l);
  }
  const status = await p.wait(60_000);
  await p[Symbol.asyncDispose]();
  return { code: status.code, out: out.join("\n"), err: p.stderr() };
}

Deno.test({
  name: "isx proxy start, status, activity and stop manage a background proxy",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const name = testName("hard-pcli");
    const home = await Deno.makeTempDir();
    const port = () => 20000 + Math.floor(Math.random() * 20000);
    const ports = { tls: port(), forward: port(), health: port() };
    await Deno.mkdir(`${home}/.config/isx`, { recursive: true });
    await Deno.writeTextFile(
      `${home}/.config/isx/config.yaml`,
      labProxyYaml(LAB, ports, "  gateway: 127.0.0.1\n  dns: false\n"),
    );
    const env = {
      HOME: home,
      XDG_CONFIG_HOME: "",
      XDG_STATE_HOME: "",
      XDG_CACHE_HOME: "",
      INCUS_SOCKET: LIVE_SOCKET,
    };
    try {
      // a stopped instance is enough to be listed, and costs no boot
      await incus.createInstance({ name, source: { type: "image", alias: LIVE_IMAGE } }, {
        step: `create ${name}`,
      });
      equal((await runIsx(["proxy", "status"], env)).code, 1);
      const started = await runIsx(["proxy", "start"], env);
      equal(started.code, 0, started.err);
      ok(started.out.includes("started (pid"), started.out);
      const st = await runIsx(["proxy", "status", "--json"], env);
      equal(st.code, 0, st.err);
      const s = JSON.parse(st.out);
      equal(s.status, "running");
      // the kernel connection limit on the guest-facing ports (proxy/callers/conn_limit.ts)
      const lo = Math.min(ports.tls, ports.forward), hi = Math.max(ports.tls, ports.forward);
      ok(
        (await nftTable()).includes(`tcp dport { ${lo}, ${hi} } ct state new add @src4`),
        "the proxy installed its connection limit",
      );
      equal(s.health.listen.tls, `127.0.0.1:${ports.tls}`);
      equal(
        (await runIsx(["proxy", "start"], env)).out,
        `isx proxy: already running (pid ${s.pid})`,
      );
      const activity = await runIsx(["proxy", "activity", "--json"], env);
      equal(activity.code, 0, `activity --json failed: ${activity.err}`);
      const records = JSON.parse(activity.out) as Record<string, unknown>[];
      // outside the default project the proxy names an instance `<project>/<name>`
      const mine = records.filter((r) => r.instance === `${LIVE_PROJECT}/${name}`);
      equal(mine.length, 1, `${name} is not listed once in ${activity.out.slice(0, 2000)}`);
      equal(mine[0]!.requests, 0, activity.out);
      ok("counting_since" in mine[0]!, activity.out);
      const stopped = await runIsx(["proxy", "stop"], env);
      equal(stopped.code, 0, stopped.err);
      equal((await runIsx(["proxy", "status"], env)).code, 1);
      equal(await nftTable(), "", "a stopped proxy leaves no connection limit");
      const logs = await runIsx(["proxy", "logs", "-n", "100"], env);
      ok(logs.out.includes("proxy: stopping"), logs.out);
    } finally {
      await runIsx(["proxy", "stop"], env).catch(() => {});
      await removeInstance(incus, name);
      incus.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});
