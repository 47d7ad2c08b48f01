import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { BridgeGuard, GUARD_TABLE, guardRemoveScript, guardScript } from "./guard.ts";
import { instanceInfo } from "./_identity.ts";
import type { Instance, InstanceState } from "../../rpc/mod.ts";

const B = { port: "veth50fe5223", mac: "10:66:6A:16:2E:20", addresses: ["10.77.0.20", "fd42::20"] };

Deno.test("guardScript drops b's MAC, address and ARP from every other port, in one swap", () => {
  const s = guardScript([B]);
  const lines = s.split("\n").map((l) => l.trim());
  equal(lines[0], `table bridge ${GUARD_TABLE}`);
  equal(lines[1], `delete table bridge ${GUARD_TABLE}`);
  ok(lines.includes("type filter hook prerouting priority -300; policy accept;"));
  for (
    const r of [
      'iifname != "veth50fe5223" ether saddr 10:66:6a:16:2e:20 drop',
      'iifname != "veth50fe5223" ip saddr 10.77.0.20 drop',
      'iifname != "veth50fe5223" arp saddr ip 10.77.0.20 drop',
      'iifname != "veth50fe5223" ip6 saddr fd42::20 drop',
    ]
  ) ok(lines.includes(r), r);
  ok(!/\bct\b/.test(s), "no conntrack: kernels without bridge conntrack load it");
});

Deno.test("guardScript leaves out values that are not a port, MAC or address", () => {
  const evil = [
    { ...B, port: 'x" accept; #' },
    { ...B, mac: "10:66:6a:16:2e:20 accept" },
    { ...B, port: "vethok", addresses: ["10.0.0.1; flush ruleset", "1.2.3.4"] },
  ];
  const s = guardScript(evil);
  equal(s.match(/accept/g)?.length, 1, "only the chain policy accepts");
  ok(!s.includes("flush"));
  ok(s.includes('iifname != "vethok" ip saddr 1.2.3.4 drop'));
  equal(s.match(/ether saddr/g)?.length, 1);
});

Deno.test("BridgeGuard writes only changes, reports failure, and removes its table", async () => {
  const ran: string[] = [];
  let fail = false;
  const g = new BridgeGuard((script) => {
    if (fail) return Promise.reject(new TypeError("nft: Operation not permitted"));
    ran.push(script);
    return Promise.resolve();
  });
  await g.sync([B]);
  await g.sync([B]);
  equal(ran.length, 1);
  ok(g.active);
  fail = true;
  await g.sync([]);
  equal(g.active, false);
  fail = false;
  await g.sync([]);
  equal(ran.length, 2);
  await g.close();
  assertEquals(ran.at(-1), guardRemoveScript());
  equal(g.active, false);
});

Deno.test("instanceInfo guards a running instance's configured NIC, not a stopped one's", () => {
  const inst = (status: string) =>
    ({
      name: "b",
      project: "default",
      status,
      created_at: "t",
      config: { "volatile.eth0.host_name": B.port, "volatile.eth0.hwaddr": B.mac },
      devices: {},
      expanded_devices: {
        eth0: { type: "nic", network: "incusbr0", "ipv4.address": "10.77.0.20" },
      },
      state: { status, network: {} },
    }) as unknown as Instance & { state: InstanceState };
  assertEquals(instanceInfo(inst("Running")).guard, [
    { port: B.port, mac: B.mac, addresses: ["10.77.0.20"] },
  ]);
  equal(instanceInfo(inst("Stopped")).guard, undefined);
});
