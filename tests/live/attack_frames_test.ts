/**
 * The bridge guard attacked with frames it could not parse before (issue 18, part 1): root in
 * a plain `incus copy` container and in an isb sandbox sends gratuitous ARP and IPv4 as a
 * pinned, trusted isx instance b behind 802.1Q and 802.1ad tags (one and two, VID 0, which
 * the host strips, and others), and untagged with b's address and with b's MAC. The IPv4
 * goes through a relay in the attacker (a veth holding b's address, `curl --interface`), so
 * a frame the host accepts is a real TLS call to the real proxy as b. What must hold: the
 * upstream (a fake on loopback) never sees b's key, b's counters do not move, the host's
 * neighbour entry for b never names the attacker, and no tagged frame reaches another port
 * (b itself counts what arrives from each attacking MAC).
 *
 * A guest on the user's machine: its own Incus project, its own bridge (never `incusbr0`),
 * its own proxy and CA in a temp dir, its own guard tables (named for its bridge) fed only
 * with its project's instances; all removed at the end, also on failure.
 *
 * @module
 */

import { deepStrictEqual as assertEquals, equal, notEqual, ok } from "node:assert/strict";
import { LIVE_SOCKET, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { ClientRegistry, incusSource, type InstanceSource } from "../../proxy/callers/clients.ts";
import { BridgeGuard, nftBinary } from "../../proxy/callers/guard.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { parseActivity, Policy, startProxy } from "../../proxy/mod.ts";
import type { ActivityEntry } from "../../proxy/activity/activity.ts";
import { startFakeUpstream } from "../fakes/upstream.ts";
import { addressOf, launchPinned, TRUSTED_STAMPS, until } from "./_pinned.ts";
import { liveRig } from "./_rpc.ts";

const REAL = "sk-ant-api03-FRAMES-REAL-KEY-0123456789";
const PLACEHOLDER = "sk-ant-placeholder";
const IMAGE = "dev-base"; // python3, curl and ip (scripts/host-setup.sh)
const FRAMES = new URL("./attack_frames.py", import.meta.url);
const dec = new TextDecoder();

/** Tag stacks (TPID:VID, outer first): single and double, 802.1Q and 802.1ad, VID 0 and not. */
const TAGS = [
  "8100:0",
  "88a8:0",
  "8100:0,8100:0",
  "88a8:0,8100:0",
  "8100:5",
  "88a8:7,8100:9",
];

async function sh(incus: IncusClient, name: string, script: string, timeoutMs = 120_000) {
  let r;
  try {
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  } catch (e) {
    // A busy incusd sometimes loses an exec websocket; the scripts here are safe to repeat.
    if (!(e instanceof IsbError && e.code === "websocket")) throw e;
    r = await incus.execCapture(name, ["sh", "-c", script], { timeoutMs });
  }
  return { code: r.exitCode, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

/** Only the instances of `project` (the guard and the registry never see the user's). */
function projectOnly(src: InstanceSource, project: string): InstanceSource {
  return {
    listInstances: async () =>
      (await src.listInstances()).filter((i) => i.name.startsWith(`${project}/`)),
    ...(src.events ? { events: (signal: AbortSignal) => src.events!(signal) } : {}),
  };
}

/** Runs a command on the host (the test's own netns and veth only); its stdout, or throws. */
async function host(args: string[]): Promise<string> {
  const out = await new Deno.Command(args[0]!, { args: args.slice(1), stdin: "null" }).output();
  if (!out.success) throw new Error(`${args.join(" ")}: ${dec.decode(out.stderr).trim()}`);
  return dec.decode(out.stdout);
}

async function hostNeighbour(address: string, bridge: string): Promise<string> {
  const out = await new Deno.Command("ip", { args: ["neigh", "show", address, "dev", bridge] })
    .output();
  return dec.decode(out.stdout).toLowerCase();
}

/** A locally administered MAC for attack `n` (never an Incus one: `10:66:6a:…`). */
const attackMac = (who: number, n: number) =>
  `02:1f:${who.toString(16).padStart(2, "0")}:00:00:${n.toString(16).padStart(2, "0")}`;

Deno.test({
  name: "bridge guard: tagged and forged frames from an unfiltered neighbour never act as b",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET });
    const id = crypto.randomUUID().slice(0, 6);
    const project = `i-frames-${id}`;
    const bridge = `ifr${id}`;
    const table = `isx_guard_${bridge}`;
    const netns = `i-frames-${id}`;
    const hostPort = `ifrh${id}`;
    const pc = incus.withProject(project);
    await using rig = await liveRig();
    const domain = `api-${id}.anthropic.isx-test`;
    const [b, tpl, plain, sandbox] = [
      testName("frB"),
      testName("frT"),
      testName("frP"),
      testName("frS"),
    ];
    const dir = await Deno.makeTempDir({ prefix: "i-frames-" });
    const up = startFakeUpstream();
    const guard = new BridgeGuard(nftBinary(), table);
    let registry: ClientRegistry | undefined;
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    let madeProject = false;
    let madeBridge = false;
    try {
      await incus.call("POST", "/1.0/projects", {
        body: {
          name: project,
          config: { "features.images": "false", "features.profiles": "false" },
        },
      });
      madeProject = true;
      const used = new Set(
        ((await incus.call("GET", "/1.0/networks", { query: { recursion: 1 } })).metadata as {
          config?: Record<string, string>;
        }[]).map((n) => n.config?.["ipv4.address"]?.split(".").slice(0, 3).join(".")),
      );
      let subnet = "";
      do subnet = `10.${200 + Math.floor(Math.random() * 50)}.${
        Math.floor(Math.random() * 250)
      }`; while (used.has(subnet));
      const gateway = `${subnet}.1`;
      await incus.createNetwork({
        name: bridge,
        config: { "ipv4.address": `${gateway}/24`, "ipv4.nat": "false", "ipv6.address": "none" },
      }, { step: `create ${bridge}` });
      madeBridge = true;

      const ca = await loadCa(`${dir}/ca`);
      const policy = new Policy(
        parseCredentials(`anthropic: { accounts: { main: { api_key: ${REAL} } } }`),
        { hosts: { anthropic: [domain] } },
      );
      // as the proxy host does: the guard rewritten before each listing names callers
      registry = new ClientRegistry(projectOnly(incusSource(incus), project), {
        now: Date.now,
        minRefreshMs: 200,
        onListing: (list) =>
          guard.sync(list.flatMap((i) => i.guard ?? []), list.flatMap((i) => i.ports ?? [])),
      });
      await registry.start();
      proxy = await startProxy({
        listen: {
          tls: { hostname: gateway, port: 0 },
          forward: { hostname: gateway, port: 0 },
          health: [{ hostname: "127.0.0.1", port: 0 }],
        },
        policy,
        ca,
        clients: registry,
        upstreamOverrides: { [domain]: up.origin },
      });
      const port = proxy.addrs.tls.port;
      const activity = async (): Promise<Record<string, ActivityEntry>> =>
        parseActivity(
          await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[0]!.port}/activity`)).json(),
        ).instances;
      const curl = (extra: string, max = 8, cacert = "/root/ca.crt") =>
        `curl -sS --max-time ${max} -o /dev/null -w '%{http_code}' --cacert ${cacert} ` +
        `--resolve ${domain}:${port}:${gateway} ${extra} -H 'x-api-key: ${PLACEHOLDER}' ` +
        `-d '{}' https://${domain}:${port}/v1/messages`;
      const call = async (name: string, extra = "", max = 8) => {
        const before = up.requests.length;
        const r = await sh(pc, name, curl(extra, max));
        return {
          status: r.out,
          seen: up.requests.slice(before).map((q) => q.headers["x-api-key"]),
        };
      };

      const nic = { eth0: { type: "nic", name: "eth0", network: bridge } };
      const [ipB] = await Promise.all([
        launchPinned(pc, b, { stamps: { ...TRUSTED_STAMPS }, image: IMAGE, bridge }),
        // a plain `incus copy` of a template: no filters on its NIC
        pc.createInstance(
          { name: tpl, source: { type: "image", alias: IMAGE }, devices: nic, start: false },
          { step: `create ${tpl}` },
        ).then(() =>
          pc.createInstance({ name: plain, source: { type: "copy", source: tpl }, start: true }, {
            step: `copy ${tpl} to ${plain}`,
          })
        ).then(() => addressOf(pc, plain)),
        rig.ok("sandbox.create", {
          project,
          spec: {
            container_name: sandbox,
            image: IMAGE,
            raw_devices: { eth0: { type: "nic", name: "eth0", network: bridge } },
          },
        }).then(() => addressOf(pc, sandbox)),
      ]);
      const macB = (await pc.getInstance(b)).value.config["volatile.eth0.hwaddr"]!.toLowerCase();
      ok(macB, "b has an Incus MAC");
      await registry.refresh();
      ok(guard.active, "the guard is installed (the live tests run as root)");
      const listed = dec.decode(
        (await new Deno.Command("nft", { args: ["list", "table", "bridge", table] }).output())
          .stdout,
      );
      ok(listed.includes(`ip saddr ${ipB} drop`), "b is guarded");

      await t.step("setup: the CA and the frame tool in every guest", async () => {
        const tool = await Deno.readTextFile(FRAMES);
        await Promise.all([b, plain, sandbox].map(async (n) => {
          await pc.pushFile(n, "/root/ca.crt", ca.certPem, { step: `CA to ${n}`, mode: 0o644 });
          await pc.pushFile(n, "/root/frames.py", tool, { step: `frames to ${n}`, mode: 0o644 });
        }));
      });

      await t.step(
        "b, pinned and trusted, gets the key; the neighbours their placeholder",
        async () => {
          const r = await until("b's call", async () => {
            const x = await call(b);
            return x.status === "200" ? x : undefined;
          }, 60_000);
          assertEquals(r.seen, [REAL]);
          for (const n of [plain, sandbox]) {
            const x = await call(n);
            equal(x.status, "200", `${n}: ${x.status}`);
            assertEquals(x.seen, [PLACEHOLDER], n);
          }
        },
      );

      const attackers: [string, string, number][] = [
        [plain, "a plain incus copy", 1],
        [sandbox, "an isb sandbox", 2],
      ];
      for (const [attacker, label, who] of attackers) {
        const macs = [...TAGS.map((_, i) => attackMac(who, i)), attackMac(who, 0xee)];
        await t.step(
          `${label}: b's address behind a veth and a relay, eth0 unaddressed`,
          async () => {
            // b counts what reaches it from each attacking MAC (broadcast ARP floods every port)
            const w = await sh(
              pc,
              b,
              `rm -f /root/seen-${who}; (python3 /root/frames.py sniff ${
                macs.join(",")
              } /root/seen-${who} >/dev/null 2>&1 & echo $! > /root/sniff-${who}.pid)`,
            );
            equal(w.code, 0, w.err);
            const r = await sh(
              pc,
              attacker,
              [
                "ip addr flush dev eth0",
                "ip link set eth0 promisc on",
                "ip link add v0 type veth peer name v1",
                "ip link set v0 mtu 65000",
                "ip link set v1 mtu 65000",
                "ip link set v1 up",
                "ip link set v0 up",
                `ip addr add ${ipB}/24 dev v0`,
                `ip route replace ${subnet}.0/24 dev v0 src ${ipB} mtu lock 1400 advmss 1300`,
              ].join(" && "),
            );
            equal(r.code, 0, r.err);
          },
        );
        // one attack: GARP for b behind `tags` from `mac`, then a call through the relay
        const attack = async (tags: string, mac: string) => {
          const before = await activity();
          const r = await sh(
            pc,
            attacker,
            [
              `ip link set v0 address ${mac}`,
              `python3 /root/frames.py garp eth0 ${ipB} ${mac} '${tags}'`,
              `(python3 /root/frames.py relay '${tags}' ${mac} >/root/relay.log 2>&1 & echo $! > /root/relay.pid)`,
              "sleep 0.3",
              `python3 /root/frames.py garp v0 ${ipB} ${mac} ''`,
            ].join(" && "),
          );
          equal(r.code, 0, r.err);
          const before2 = up.requests.length;
          const c = await sh(pc, attacker, curl(`--interface ${ipB}`, 5));
          await sh(pc, attacker, "kill $(cat /root/relay.pid)");
          const seen = up.requests.slice(before2).map((q) => q.headers["x-api-key"]);
          ok(!seen.includes(REAL), `the upstream saw b's key (${tags || "untagged"}, ${mac})`);
          notEqual(c.out, "200", `the call as b got ${c.out} (${tags || "untagged"})`);
          const after = await activity();
          equal(after[`${project}/${b}`]?.requests, before[`${project}/${b}`]?.requests);
          equal(
            after[`${project}/${b}`]?.traffic_requests,
            before[`${project}/${b}`]?.traffic_requests,
            "b's counters moved",
          );
          if (mac !== macB) {
            ok(
              !(await hostNeighbour(ipB, bridge)).includes(mac),
              `the host's entry for b is ${mac}`,
            );
          }
        };
        for (const [i, tags] of TAGS.entries()) {
          await t.step(`${label}: ARP and IPv4 as b behind ${tags}`, () => attack(tags, macs[i]!));
        }
        await t.step(
          `${label}: untagged, b's address with its own MAC`,
          () => attack("", macs.at(-1)!),
        );
        await t.step(`${label}: untagged, b's address and b's MAC`, () => attack("", macB));
        await t.step(`${label}: no tagged frame reached b`, async () => {
          await new Promise((r) => setTimeout(r, 500)); // the sniffer's last write
          const s = await sh(
            pc,
            b,
            `kill $(cat /root/sniff-${who}.pid); cat /root/seen-${who} 2>/dev/null || true`,
          );
          const counts = Object.fromEntries(
            s.out.trim().split(/\s+/).filter(Boolean).map((kv) =>
              kv.split("=") as [string, string]
            ),
          );
          // frames b received from each tag stack's MAC (all of them named, so a failure shows each)
          assertEquals(
            Object.fromEntries(TAGS.map((tags, i) => [tags, counts[macs[i]!] ?? "0"])),
            Object.fromEntries(TAGS.map((tags) => [tags, "0"])),
          );
        });
      }

      await t.step(
        "a port no listing names (a veth of the test's own netns on its bridge) cannot reach the proxy as b behind tags",
        async () => {
          // what an instance is between its start and the listing that names its port: only the
          // chain on the bridge device stands between its tagged frames and the host
          await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
          await host(["ip", "netns", "add", netns]);
          await host([
            "ip",
            "link",
            "add",
            hostPort,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            netns,
          ]);
          await host(["ip", "link", "set", hostPort, "master", bridge, "up"]);
          const inNs = (script: string) => host(["ip", "netns", "exec", netns, "sh", "-c", script]);
          await inNs(
            [
              "ip link set lo up",
              "ip link set eth0 up",
              "ip link set eth0 promisc on",
              "ip link add v0 type veth peer name v1",
              "ip link set v0 mtu 65000",
              "ip link set v1 mtu 65000",
              "ip link set v1 up",
              "ip link set v0 up",
              `ip addr add ${ipB}/24 dev v0`,
              `ip route replace ${subnet}.0/24 dev v0 src ${ipB} mtu lock 1400 advmss 1300`,
            ].join(" && "),
          );
          for (const [i, tags] of ["8100:0,8100:0", "88a8:0,8100:0", "8100:0"].entries()) {
            const mac = attackMac(3, i);
            const before = await activity();
            await inNs(
              [
                `ip link set v0 address ${mac}`,
                `python3 ${FRAMES.pathname} garp eth0 ${ipB} ${mac} '${tags}'`,
                `(python3 ${FRAMES.pathname} relay '${tags}' ${mac} >${dir}/relay.log 2>&1 & echo $! > ${dir}/relay.pid)`,
                "sleep 0.3",
                `python3 ${FRAMES.pathname} garp v0 ${ipB} ${mac} ''`,
              ].join(" && "),
            );
            const n = up.requests.length;
            const c = await inNs(`${curl(`--interface ${ipB}`, 5, `${dir}/ca.crt`)} || true`);
            await inNs(`kill $(cat ${dir}/relay.pid); rm ${dir}/relay.pid`);
            const seen = up.requests.slice(n).map((q) => q.headers["x-api-key"]);
            ok(!seen.includes(REAL), `the upstream saw b's key from the unlisted port (${tags})`);
            notEqual(c, "200", `the call as b from the unlisted port got ${c} (${tags})`);
            const after = await activity();
            equal(after[`${project}/${b}`]?.requests, before[`${project}/${b}`]?.requests);
            ok(
              !(await hostNeighbour(ipB, bridge)).includes(mac),
              `the host's entry for b is ${mac}`,
            );
          }
        },
      );

      await t.step("after the attacks, b still gets its key and is counted once", async () => {
        const before = (await activity())[`${project}/${b}`]!;
        const r = await until("b to reach the proxy again", async () => {
          const x = await call(b);
          return x.status === "200" ? x : undefined;
        }, 30_000);
        assertEquals(r.seen, [REAL]);
        equal((await activity())[`${project}/${b}`]!.requests, before.requests + 1);
      });
    } finally {
      await rig.engine.remove({ name: sandbox, force: true }, { project }).catch(() => {});
      await Promise.all(
        [b, plain, tpl, sandbox].map((n) => removeInstance(pc, n).catch(() => {})),
      );
      await host(["sh", "-c", `[ ! -f ${dir}/relay.pid ] || kill $(cat ${dir}/relay.pid)`]).catch(
        () => {},
      );
      await host(["ip", "netns", "del", netns]).catch(() => {});
      await host(["ip", "link", "del", hostPort]).catch(() => {});
      await proxy?.close();
      await registry?.close();
      await guard.close();
      await up.close();
      if (madeBridge) {
        await incus.deleteNetwork(bridge, { step: `delete ${bridge}` }).catch(() => {});
      }
      if (madeProject) {
        await incus.call("DELETE", `/1.0/projects/${project}`).catch(() => {});
      }
      incus.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
