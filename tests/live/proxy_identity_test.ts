/**
 * The credential boundary attacked from inside real containers on the real bridge (issue 8,
 * holes 1 and 2): root in one instance takes another's address (on `lo` and `eth0`, with
 * gratuitous ARP, and with its MAC too) and calls the proxy; an isb sandbox and a plain
 * `incus launch` container call it with placeholders; a guest tries to stamp itself. The
 * upstream is the loopback fake behind the real proxy; the intercepted name is test-only.
 */

import { deepStrictEqual as assertEquals, equal, notEqual, ok } from "node:assert/strict";
import {
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  ofLab,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { createIncusClient, type IncusClient, IsbError } from "../../rpc/mod.ts";
import { loadCa } from "../../proxy/tls/ca.ts";
import { ClientRegistry, incusSource } from "../../proxy/callers/clients.ts";
import { BridgeGuard, nftBinary } from "../../proxy/callers/guard.ts";
import { parseCredentials } from "../../proxy/config/credentials.ts";
import { applyDns, bridgeGateway } from "../../proxy/host/dns.ts";
import { parseActivity, Policy, startProxy } from "../../proxy/mod.ts";
import type { ActivityEntry } from "../../proxy/activity/activity.ts";
import { startFakeUpstream } from "../fakes/upstream.ts";
import { addressOf, launchPinned, TRUSTED_STAMPS, until } from "./_pinned.ts";
import { cleanup, liveRig } from "./_rpc.ts";

const REAL = "sk-ant-api03-IDENTITY-REAL-KEY-0123456789";
const PLACEHOLDER = "sk-ant-placeholder";
const BRIDGE = LIVE_BRIDGE; // the lab's (tests/helpers/lab.ts), never the user's
const IMAGE = "dev-base"; // curl, python3 and ip (scripts/host-setup.sh)
const dec = new TextDecoder();

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

/** Gratuitous ARP (request and reply forms) for `ip` from eth0, with `mac` as sender. */
const GARP = `
import socket, struct, sys
ip, mac = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
m = bytes.fromhex(mac.replace(":", ""))
a = socket.inet_aton(ip)
bc = b"\\xff" * 6
for op in (1, 2):
    s.send(bc + m + b"\\x08\\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + m + a + bc + a)
`;

Deno.test({
  name: "proxy: no guest can call as another instance, and only trusted isx instances get keys",
  ignore: NO_INCUS,
  async fn(t) {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    await using rig = await liveRig();
    const id = crypto.randomUUID().slice(0, 8);
    const domain = `api-${id}.anthropic.isx-test`;
    const tag = `isx-identity-test-${id}`;
    const [a, b, plain] = [testName("idA"), testName("idB"), testName("idP")];
    const sandbox = testName("idS");
    const created: string[] = [];
    const dir = await Deno.makeTempDir();
    const up = startFakeUpstream();
    let registry: ClientRegistry | undefined;
    // a table of its own, so a proxy running on the host keeps its guard meanwhile
    const table = `isx_guard_isxtest${crypto.randomUUID().slice(0, 8)}`; // a test-made name (lab.ts)
    const guard = new BridgeGuard(nftBinary(), table);
    let proxy: Awaited<ReturnType<typeof startProxy>> | undefined;
    let gateway = "";
    try {
      gateway = (await bridgeGateway(incus, BRIDGE))!;
      const ca = await loadCa(`${dir}/ca`);
      const policy = new Policy(
        parseCredentials(`anthropic: { accounts: { main: { api_key: ${REAL} } } }`),
        { hosts: { anthropic: [domain] } },
      );
      // as the proxy host does: the bridge guard rewritten before each listing names callers
      registry = new ClientRegistry(incusSource(incus), {
        now: Date.now,
        minRefreshMs: 200,
        onListing: (list) => guard.sync(list.flatMap((i) => i.guard ?? [])),
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
      await applyDns(incus, BRIDGE, { names: policy.dnsNames(), gateway, tag });
      const url = `https://${domain}:${proxy.addrs.tls.port}/v1/messages`;
      const activity = async (): Promise<Record<string, ActivityEntry>> =>
        ofLab(parseActivity(
          await (await fetch(`http://127.0.0.1:${proxy!.addrs.health[0]!.port}/activity`)).json(),
        )).instances;
      // the x-api-key the upstream saw for one call from `name` (undefined: none arrived)
      const call = async (name: string, extra = "") => {
        const before = up.requests.length;
        const r = await sh(
          incus,
          name,
          `curl -sS --max-time 8 -o /dev/null -w '%{http_code}' ${extra} -H 'x-api-key: ${PLACEHOLDER}' -d '{}' ${url}`,
        );
        const seen = up.requests.slice(before).map((q) => q.headers["x-api-key"]);
        return { code: r.code, status: r.out, seen };
      };

      created.push(a, b, plain, sandbox);
      const [ipA, ipB] = await Promise.all([
        launchPinned(incus, a, { stamps: { ...TRUSTED_STAMPS }, image: IMAGE }),
        launchPinned(incus, b, { stamps: { ...TRUSTED_STAMPS }, image: IMAGE }),
        incus.createInstance(
          { name: plain, source: { type: "image", alias: IMAGE }, start: true },
          { step: `launch ${plain}` },
        ).then(() => addressOf(incus, plain)),
        rig.ok("sandbox.ensure", { spec: { container_name: sandbox, image: IMAGE } })
          .then(() => addressOf(incus, sandbox)),
      ]);
      const macB = (await incus.getInstance(b)).value.config["volatile.eth0.hwaddr"]!;
      ok(macB, "b has an Incus MAC");
      await registry.refresh();
      ok(guard.active, "the bridge guard is installed (the live tests run as root)");
      const listed = await new Deno.Command("nft", {
        args: ["list", "table", "bridge", table],
      })
        .output();
      ok(new TextDecoder().decode(listed.stdout).includes(`ip saddr ${ipB} drop`), "b is guarded");

      await t.step("setup: the proxy CA and the test name in every guest", async () => {
        await Promise.all([a, b, plain, sandbox].map(async (n) => {
          await incus.pushFile(n, "/usr/local/share/ca-certificates/isx-proxy.crt", ca.certPem, {
            step: `push CA to ${n}`,
            mode: 0o644,
          });
          await incus.pushFile(n, "/root/garp.py", GARP, { step: "push garp.py", mode: 0o644 });
          const r = await sh(incus, n, "update-ca-certificates >/dev/null");
          equal(r.code, 0, r.err);
          await until(`${domain} to resolve to the gateway in ${n}`, async () => {
            const g = await sh(incus, n, `getent hosts ${domain} || true`).catch(() => undefined);
            return g?.out.startsWith(gateway) ? true : undefined;
          });
        }));
      });

      await t.step("a trusted isx instance with a pinned NIC gets the key", async () => {
        const r = await call(b);
        equal(r.status, "200");
        assertEquals(r.seen, [REAL]);
      });

      await t.step(
        "an isb sandbox and a plain incus launch container reach upstream with the placeholder",
        async () => {
          for (const n of [sandbox, plain]) {
            const r = await call(n);
            equal(r.status, "200", `${n}: ${r.status}`);
            assertEquals(r.seen, [PLACEHOLDER], n);
          }
          const now = await activity();
          ok(now[plain]!.traffic_requests >= 1, "the plain container is counted as itself");
          ok(now[sandbox]!.traffic_requests >= 1, "the sandbox is counted as itself");
        },
      );

      await t.step("a guest cannot stamp itself trusted through /dev/incus", async () => {
        const body = JSON.stringify({ "user.incus-spawn.type": "instance" });
        for (const path of ["/1.0/config", "/1.0/config/user.incus-spawn.trusted", "/1.0"]) {
          for (const method of ["PATCH", "PUT", "POST"]) {
            await sh(
              incus,
              plain,
              `curl -s -o /dev/null --unix-socket /dev/incus/sock -X ${method} -d '${body}' http://x${path}`,
            );
          }
        }
        const cfg = (await incus.getInstance(plain)).value.config;
        assertEquals(Object.keys(cfg).filter((k) => k.startsWith("user.incus-spawn.")), []);
        await registry!.refresh();
        // a busy incusd can hold a listing past curl's limit: the first answer that arrives
        const r = await until("the plain container's call", async () => {
          const x = await call(plain);
          return x.seen.length ? x : undefined;
        }, 60_000);
        assertEquals(r.seen, [PLACEHOLDER]);
      });

      const attackers: [string, string][] = [[a, "a pinned isx instance"], [
        plain,
        "a plain container",
      ]];
      for (const [attacker, label] of attackers) {
        await t.step(
          `${label} with b's address on lo and eth0, gratuitous ARP and b's MAC is never b`,
          async () => {
            const before = await activity();
            const steal = [
              `ip addr add ${ipB}/32 dev lo`,
              `ip addr add ${ipB}/24 dev eth0`,
              `python3 /root/garp.py ${ipB} $(cat /sys/class/net/eth0/address)`,
            ].join("; ");
            equal((await sh(incus, attacker, steal)).code, 0);
            // from b's address, after poisoning the host's ARP entry for it
            const spoofed = await call(attacker, `--interface ${ipB}`);
            notEqual(spoofed.status, "200", `the call from b's address got ${spoofed.status}`);
            ok(!spoofed.seen.includes(REAL), "the upstream never saw the key for the attacker");
            // and with b's MAC as well
            const mac = await sh(
              incus,
              attacker,
              `ip link set eth0 address ${macB}; python3 /root/garp.py ${ipB} ${macB}`,
            );
            equal(mac.code, 0, mac.err);
            const cloned = await call(attacker, `--interface ${ipB}`);
            notEqual(cloned.status, "200", `the call with b's MAC got ${cloned.status}`);
            ok(!cloned.seen.includes(REAL));
            const after = await activity();
            equal(after[b]!.traffic_requests, before[b]!.traffic_requests, "b's counters moved");
            equal(after[b]!.requests, before[b]!.requests);
          },
        );
        await t.step(`after ${label}'s attack, b keeps working and is counted once`, async () => {
          // the attacker's own MAC and addresses back, its neighbour cache out of the way
          const own = (await incus.getInstance(attacker)).value.config["volatile.eth0.hwaddr"]!;
          await sh(
            incus,
            attacker,
            `ip addr del ${ipB}/32 dev lo; ip addr del ${ipB}/24 dev eth0; ip link set eth0 address ${own}`,
          );
          const before = await activity();
          const r = await until("b to reach the proxy again", async () => {
            const x = await call(b);
            return x.status === "200" ? x : undefined;
          }, 30_000);
          assertEquals(r.seen, [REAL]);
          const after = await activity();
          ok(after[b]!.requests > before[b]!.requests);
        });
      }

      await t.step(
        "a pinned instance calling from its own address is counted as itself",
        async () => {
          const before = (await activity())[a]!;
          const r = await until("a to reach the proxy", async () => {
            const x = await call(a);
            return x.status === "200" ? x : undefined;
          }, 30_000);
          assertEquals(r.seen, [REAL]);
          ok(ipA);
          equal((await activity())[a]!.requests, before.requests + 1);
        },
      );
    } finally {
      await applyDns(incus, BRIDGE, { names: [], gateway, tag }).catch(() => {});
      await cleanup(rig, sandbox);
      for (const n of created) await removeInstance(incus, n).catch(() => {});
      await proxy?.close();
      await registry?.close();
      await guard.close();
      await up.close();
      incus.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
