import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { BridgeGuard, GUARD_TABLE, guardRemoveScript, guardScript } from "./guard.ts";
import { instanceInfo } from "./_identity.ts";
import type { Instance, InstanceState } from "../../rpc/mod.ts";

const B = { port: "veth50fe5223", mac: "10:66:6A:16:2E:20", addresses: ["10.77.0.20", "fd42::20"] };

const A = {
  port: "veth1a2b3c4d",
  mac: "10:66:6a:00:00:0a",
  addresses: ["10.77.0.10"],
  bridge: "incusbr0",
  pinned: true,
};

Deno.test("guardScript drops b's MAC, address and ARP from every other port, in one swap", () => {
  const s = guardScript([B]);
  const lines = s.split("\n").map((l) => l.trim());
  equal(lines[0], `table bridge ${GUARD_TABLE}`);
  equal(lines[1], `delete table bridge ${GUARD_TABLE}`);
  equal(lines[2], `table netdev ${GUARD_TABLE}`);
  equal(lines[3], `delete table netdev ${GUARD_TABLE}`);
  ok(lines.includes("type filter hook prerouting priority -300; policy accept;"));
  for (
    const r of [
      'iifname != "veth50fe5223" ether saddr 10:66:6a:16:2e:20 drop',
      'iifname != "veth50fe5223" arp saddr ether 10:66:6a:16:2e:20 drop',
      'iifname != "veth50fe5223" ip saddr 10.77.0.20 drop',
      'iifname != "veth50fe5223" arp saddr ip 10.77.0.20 drop',
      'iifname != "veth50fe5223" ip6 saddr fd42::20 drop',
    ]
  ) ok(lines.includes(r), r);
  ok(!/\bct\b/.test(s), "no conntrack: kernels without bridge conntrack load it");
});

Deno.test("guardScript: every listed port of a guarded bridge sends only IPv4, ARP and IPv6", () => {
  const s = guardScript([A], GUARD_TABLE, [
    { port: "vethplain001", bridge: "incusbr0" }, // a plain container: no configured address
    { port: "vethsandbox1", bridge: "incusbr0" }, // an isb sandbox
    { port: "vethother001", bridge: "isbbrx12345678" }, // a bridge nothing guarded is on
  ]);
  const lines = s.split("\n").map((l) => l.trim());
  ok(
    lines.includes(
      'iifname { "veth1a2b3c4d", "vethplain001", "vethsandbox1" } ether type != { ip, arp, ip6 } drop',
    ),
    s,
  );
  ok(!s.includes("vethother001"), "ports of other bridges are left alone");
  // the bridge device itself, for ports a listing has not named yet (an instance just started)
  const netdev = s.slice(s.lastIndexOf("table netdev"));
  ok(netdev.includes('type filter hook ingress device "incusbr0" priority -300; policy accept;'));
  ok(netdev.includes("ether type != { ip, arp, ip6 } drop"));
  ok(!netdev.includes("isbbrx"));
  // the tag drop comes before any rule that reads past the ether type
  const first = lines.findIndex((l) => l.includes("saddr"));
  ok(lines.findIndex((l) => l.includes("ether type != { ip, arp, ip6 } drop")) < first);
});

Deno.test("guardScript: a pinned port may send only its own MAC, addresses and ARP", () => {
  const s = guardScript([{ ...A, addresses: ["10.77.0.10", "fd42::10"] }]);
  const lines = s.split("\n").map((l) => l.trim());
  ok(lines.includes('iifname "veth1a2b3c4d" jump own_0'));
  const own = s.slice(s.indexOf("chain own_0"), s.indexOf("\t}", s.indexOf("chain own_0")));
  for (
    const r of [
      "ether type != { ip, arp, ip6 } drop",
      "ether saddr != 10:66:6a:00:00:0a drop",
      "arp saddr ether != 10:66:6a:00:00:0a drop",
      "arp saddr ip != { 10.77.0.10, 0.0.0.0 } drop",
      "ip saddr != { 10.77.0.10, 0.0.0.0 } drop",
      "ip6 saddr != { fd42::10, ::, fe80::/10 } drop",
    ]
  ) ok(own.includes(r), r);
  // an entry that is not pinned (a user's own static lease) gets no allow-list, only protection
  const loose = guardScript([{ ...A, pinned: false }]);
  ok(!loose.includes("jump own_"));
  ok(loose.includes('iifname != "veth1a2b3c4d" ip saddr 10.77.0.10 drop'));
});

Deno.test("guardScript: no bridge known, no netdev chain; the script still swaps both tables", () => {
  const s = guardScript([B]);
  ok(!s.includes("hook ingress"));
  ok(!s.includes("ether type !="), "no listed port to hold to the parseable ether types");
  ok(s.includes(`table netdev ${GUARD_TABLE} {\n}`));
});

Deno.test("guardScript leaves out values that are not a port, MAC or address", () => {
  const evil = [
    { ...B, port: 'x" accept; #' },
    { ...B, mac: "10:66:6a:16:2e:20 accept" },
    { ...B, port: "vethok", addresses: ["10.0.0.1; flush ruleset", "1.2.3.4"] },
    { ...B, port: "vethbr", bridge: 'br0" priority 0; }' },
  ];
  const s = guardScript(evil, GUARD_TABLE, [{ port: 'x" accept', bridge: "incusbr0" }]);
  equal(s.match(/accept/g)?.length, 1, "only the chain policy accepts");
  ok(!s.includes("flush"));
  ok(s.includes('iifname != "vethok" ip saddr 1.2.3.4 drop'));
  equal(s.match(/ether saddr/g)?.length, 2, "vethok and vethbr");
  ok(!s.includes("hook ingress"), "a bridge name that is not one is left out");
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
    { port: B.port, mac: B.mac, addresses: ["10.77.0.20"], bridge: "incusbr0" },
  ]);
  assertEquals(instanceInfo(inst("Running")).ports, [{ port: B.port, bridge: "incusbr0" }]);
  equal(instanceInfo(inst("Stopped")).guard, undefined);
  equal(instanceInfo(inst("Stopped")).ports, undefined);
});

Deno.test("instanceInfo: a pinned NIC is marked pinned; every running NIC's port is listed", () => {
  const base = {
    project: "p",
    status: "Running",
    created_at: "t",
    devices: {},
    state: { status: "Running", network: {} },
  };
  const pinned = instanceInfo(
    {
      ...base,
      name: "b",
      config: { "volatile.eth0.host_name": B.port, "volatile.eth0.hwaddr": B.mac },
      expanded_devices: {
        eth0: {
          type: "nic",
          network: "isxbr",
          "ipv4.address": "10.77.0.20",
          "security.ipv4_filtering": "true",
          "security.ipv6_filtering": "true",
          "security.mac_filtering": "true",
        },
      },
    } as unknown as Instance & { state: InstanceState },
  );
  assertEquals(pinned.guard, [
    { port: B.port, mac: B.mac, addresses: ["10.77.0.20"], bridge: "isxbr", pinned: true },
  ]);
  const plain = instanceInfo(
    {
      ...base,
      name: "plain",
      config: {
        "volatile.eth0.host_name": "vethplain",
        "volatile.eth1.host_name": "vethbridged",
        "volatile.eth2.host_name": "macvlanx",
      },
      expanded_devices: {
        eth0: { type: "nic", network: "isxbr" },
        eth1: { type: "nic", nictype: "bridged", parent: "br0" },
        eth2: { type: "nic", nictype: "macvlan", parent: "eth0" },
      },
    } as unknown as Instance & { state: InstanceState },
  );
  equal(plain.guard, undefined);
  assertEquals(plain.ports, [
    { port: "vethplain", bridge: "isxbr" },
    { port: "vethbridged", bridge: "br0" },
  ]);
});

Deno.test("BridgeGuard keeps the port rules when the kernel refuses the bridge-device chain", async () => {
  const ran: string[] = [];
  const g = new BridgeGuard((script) => {
    if (script.includes("hook ingress")) {
      return Promise.reject(new TypeError("nft: No such file or directory"));
    }
    ran.push(script);
    return Promise.resolve();
  });
  await g.sync([A], [{ port: "vethplain001", bridge: "incusbr0" }]);
  ok(g.active);
  equal(ran.length, 1);
  ok(!ran[0]!.includes("netdev"), "the fallback leaves the netdev table alone");
  ok(
    ran[0]!.includes(
      'iifname { "veth1a2b3c4d", "vethplain001" } ether type != { ip, arp, ip6 } drop',
    ),
  );
  await g.sync([A], [{ port: "vethplain001", bridge: "incusbr0" }]);
  equal(ran.length, 1, "the same listing is not written again");
  await g.close();
  equal(ran.at(-1), guardRemoveScript());
});
