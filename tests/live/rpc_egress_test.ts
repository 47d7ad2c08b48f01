/**
 * Egress (isb-rpc.md §13) against the real daemon: `"none"` leaves the guest without a
 * network; an allow-list is enforced by Incus's ACL, checked from inside a real container
 * with bash's /dev/tcp against two tiny HTTP servers on the host, bound to the egress
 * bridge's own address (one on the allowed port, one not); egress secrets are written for
 * the proxy and never appear in a reply, an event, the instance or a log line. Bridges take
 * their subnet from ISB_EGRESS_SUBNETS, so no test makes incusd probe addresses off-host.
 */

import assert from "node:assert/strict";
import { hasCode } from "../../rpc/errors.ts";
import { setLogSink } from "../../rpc/log.ts";
import { egressAclName, egressNetworkName } from "../../rpc/sandbox/egress/names.ts";
import { LIVE_IMAGE, LIVE_PROJECT, NO_INCUS, testName } from "../helpers/live.ts";
import { cleanup, type LiveRig, liveRig } from "./_rpc.ts";

/** Bridges get a /24 from here, never `auto` (which makes incusd ping random 10.x hosts). */
const ISB_EGRESS_SUBNETS = "10.78.0.0/16";

async function gone(rig: LiveRig, name: string) {
  const h = rig.incus.withProject("default");
  const net = await h.getNetwork(egressNetworkName(LIVE_PROJECT, name)).then(
    () => true,
    () => false,
  );
  const acl = await h.getNetworkAcl(egressAclName(LIVE_PROJECT, name)).then(
    () => true,
    () => false,
  );
  return !net && !acl;
}

async function teardown(rig: LiveRig, name: string) {
  await cleanup(rig, name);
  const h = rig.incus.withProject("default");
  await h.deleteNetwork(egressNetworkName(LIVE_PROJECT, name), { step: "cleanup" }).catch(() => {});
  await h.deleteNetworkAcl(egressAclName(LIVE_PROJECT, name), { step: "cleanup" }).catch(() => {});
}

/**
 * Runs argv in the guest. This file tests the ACL, not exec: an exec whose websockets a
 * stalled incusd let time out (`websocket`, HTTP 404) is tried once more.
 */
function exec(rig: LiveRig, name: string, argv: string[]) {
  return rig.incus.execCapture(name, argv).catch((e) => {
    if (!hasCode(e, "websocket")) throw e;
    return rig.incus.execCapture(name, argv);
  });
}

/** Runs a fixed probe in the guest: can it open a TCP connection to ip:port within 3 s? */
async function reach(rig: LiveRig, name: string, ip: string, port: number): Promise<boolean> {
  const script =
    'exec 3<>"/dev/tcp/$1/$2" && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && head -c 2 <&3';
  const r = await exec(rig, name, [
    "timeout",
    "3",
    "bash",
    "-c",
    script,
    "probe",
    ip,
    String(port),
  ]);
  return r.exitCode === 0 && new TextDecoder().decode(r.stdout) === "HT";
}

Deno.test({
  name: "sandbox.ensure with egress none gives the guest no network, and remove tears it down",
  ignore: NO_INCUS,
  async fn() {
    await using rig = await liveRig({ env: { ISB_EGRESS_SUBNETS } });
    const name = testName("egn");
    try {
      const r = await rig.call("sandbox.ensure", {
        spec: { container_name: name, image: LIVE_IMAGE, egress: "none" },
      });
      assert.equal(r.error, undefined, JSON.stringify(r.error));
      const bridge = egressNetworkName(LIVE_PROJECT, name);
      const info = (r.result as {
        info: { config: Record<string, string>; devices: Record<string, Record<string, string>> };
      }).info;
      assert.deepEqual(info.devices.eth0, { type: "nic", name: "eth0", network: bridge });
      assert.equal(info.config["user.isb.egress-for"], `${LIVE_PROJECT}/${name}`);
      const net = (await rig.incus.withProject("default").getNetwork(bridge)).value;
      assert.equal(net.config["ipv4.address"], "none");
      assert.equal(net.config["ipv4.nat"], "false");
      assert.equal(net.config["security.acls"], egressAclName(LIVE_PROJECT, name));
      assert.equal(net.config["security.acls.default.egress.action"], "drop");
      const route = await exec(rig, name, ["cat", "/proc/net/route"]);
      assert.equal(
        new TextDecoder().decode(route.stdout).trim().split("\n").length,
        1,
        "only the header",
      );
      const again = await rig.ok("sandbox.ensure", {
        spec: { container_name: name, image: LIVE_IMAGE, egress: "none" },
      });
      assert.deepEqual((again as { report: { applied: unknown[] } }).report.applied, []);
      await rig.ok("sandbox.remove", { name, force: true });
      assert.ok(await gone(rig, name), "bridge and ACL deleted");
    } finally {
      await teardown(rig, name);
    }
  },
});

Deno.test({
  name:
    "sandbox.ensure with an allow-list lets the guest reach only allowed ports, and keeps secrets out",
  ignore: NO_INCUS,
  async fn() {
    const secret = `s3cr3t-${crypto.randomUUID()}`;
    const logs: string[] = [];
    setLogSink((line) => logs.push(line));
    await using rig = await liveRig({
      env: { ISB_TEST_EGRESS_SECRET: secret, ISB_EGRESS_SUBNETS },
    });
    const name = testName("ega");
    const bridge = egressNetworkName(LIVE_PROJECT, name);
    const allowed = 20000 + Math.floor(Math.random() * 20000);
    const denied = allowed + 1;
    const spec = {
      container_name: name,
      image: LIVE_IMAGE,
      ready: ["running", "default_route"],
      egress: {
        allow: [`allowed.test:${allowed}`],
        secrets: ["TOKEN_X=ISB_TEST_EGRESS_SECRET@api.example.test"],
      },
    };
    const servers: Deno.HttpServer[] = [];
    try {
      const r = await rig.call("sandbox.ensure", { spec });
      assert.equal(r.error, undefined, JSON.stringify(r.error));
      const wire = JSON.stringify(r);
      assert.ok(!wire.includes(secret), "the reply and events never carry the secret");
      const inst = (await rig.incus.getInstance(name)).value;
      assert.ok(!JSON.stringify(inst).includes(secret), "the instance never holds the secret");
      const placeholder = inst.config["environment.TOKEN_X"]!;
      assert.match(placeholder, /^isb_placeholder_[0-9a-f]{32}$/);
      assert.equal(inst.config["environment.NODE_EXTRA_CA_CERTS"], "/etc/isb/egress-ca.crt");
      assert.match(inst.config["user.isb.egress-ca"] ?? "", /^[0-9a-f]{16}$/);

      const state = `${rig.dir}/state/egress/${bridge}`;
      assert.equal((await Deno.stat(`${state}/secrets.json`)).mode! & 0o777, 0o600);
      assert.equal((await Deno.stat(`${state}/ca.key`)).mode! & 0o777, 0o600);
      assert.deepEqual(JSON.parse(await Deno.readTextFile(`${state}/secrets.json`)), {
        instance: `${LIVE_PROJECT}/${name}`,
        secrets: [{ env: "TOKEN_X", placeholder, hosts: ["api.example.test:443"], value: secret }],
      });
      const guestCa = await rig.incus.pullFile(name, "/etc/isb/egress-ca.crt");
      assert.equal(
        new TextDecoder().decode(guestCa.data),
        await Deno.readTextFile(`${state}/ca.crt`),
      );

      const net = (await rig.incus.withProject("default").getNetwork(bridge)).value;
      const ip = net.config["ipv4.address"]!.split("/")[0]!;
      assert.match(ip, /^10\.78\.\d+\.1$/);
      assert.match(
        net.config["raw.dnsmasq"]!,
        new RegExp(`address=/allowed\\.test/${ip.replace(/\./g, "\\.")}`),
      );
      const acl =
        (await rig.incus.withProject("default").getNetworkAcl(egressAclName(LIVE_PROJECT, name)))
          .value;
      assert.equal(acl.egress[0]?.destination, `${ip}/32`);
      assert.equal(acl.egress[0]?.destination_port, `443,${allowed}`);

      for (const port of [allowed, denied]) {
        servers.push(
          Deno.serve({ hostname: ip, port, onListen: () => {} }, () => new Response("ok")),
        );
      }
      assert.equal(await reach(rig, name, ip, allowed), true, "allowed port answers");
      assert.equal(await reach(rig, name, ip, denied), false, "other port is dropped");
      const dns = await exec(rig, name, ["getent", "hosts", "allowed.test"]);
      assert.match(
        new TextDecoder().decode(dns.stdout),
        new RegExp(`^${ip.replace(/\./g, "\\.")}\\s`),
      );

      const noSecret = await rig.call("sandbox.plan", {
        spec: {
          ...spec,
          egress: { ...spec.egress, secrets: ["OTHER=ISB_TEST_UNSET_VAR@a.example.test"] },
        },
      });
      assert.equal(noSecret.error, undefined, "plan does not need the value");
      await rig.ok("sandbox.remove", { name, force: true });
      assert.ok(await gone(rig, name), "bridge and ACL deleted");
      assert.equal(
        await Deno.stat(state).then(() => true, () => false),
        false,
        "CA and secrets deleted",
      );
      assert.ok(!logs.join("\n").includes(secret), "no log line carries the secret");
    } finally {
      for (const s of servers) await s.shutdown();
      await teardown(rig, name);
      setLogSink((line) => Deno.stderr.writeSync(new TextEncoder().encode(line + "\n")));
    }
  },
});
