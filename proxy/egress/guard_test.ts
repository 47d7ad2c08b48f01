import { equal, rejects } from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import {
  egressAddress,
  embeddedV4,
  guardedAddresses,
  inCidr,
  isIpLiteral,
  isPublicAddress,
  parseCidr,
  publicGuard,
  targetAllowed,
} from "./guard.ts";

const CASES: [string, boolean][] = [
  ["93.184.215.14", true],
  ["8.8.8.8", true],
  ["127.0.0.1", false],
  ["10.77.0.1", false],
  ["172.16.0.1", false],
  ["172.32.0.1", true],
  ["192.168.1.1", false],
  ["169.254.169.254", false],
  ["100.64.0.1", false],
  ["0.0.0.0", false],
  ["224.0.0.1", false],
  ["255.255.255.255", false],
  ["2606:4700::1111", true],
  ["::1", false],
  ["::", false],
  ["fe80::1", false],
  ["fd00::1", false],
  ["ff02::1", false],
  ["::ffff:127.0.0.1", false],
  ["::ffff:8.8.8.8", true],
  ["64:ff9b::10.0.0.1", false],
  ["2001:db8::1", false],
  ["not-an-address", false],
  ["999.1.1.1", false],
  ["100.127.255.255", false],
  ["100.128.0.1", true],
  ["198.18.0.1", false],
  ["240.0.0.1", false],
  ["192.88.99.1", false],
  ["192.0.0.8", false],
  ["fc00::1", false],
  ["fdff:ffff::1", false],
  ["fec0::1", false],
  ["febf::1", false],
  ["100::1", false],
  ["::2", false],
  ["2001::1", false], // Teredo
  ["2001:2::1", false], // benchmarking
  ["3fff::1", false],
  ["64:ff9b:1::a00:1", false], // local-use NAT64
  ["::ffff:10.0.0.1", false],
  ["::ffff:169.254.169.254", false],
  ["::ffff:0a00:0001", false],
  ["::10.0.0.1", false],
  ["64:ff9b::8.8.8.8", true],
  ["2002:0a00:0001::1", false], // 6to4 of 10.0.0.1
  ["2002:c0a8:0101::", false], // 6to4 of 192.168.1.1
  ["2002:0808:0808::1", true], // 6to4 of 8.8.8.8
  ["2a00:1450:4001::1", true],
  ["[2606:4700::1111]", true],
  ["::ffff:999.0.0.1", false],
];

Deno.test("isPublicAddress tells public unicast from special addresses", () => {
  for (const [ip, want] of CASES) equal(isPublicAddress(ip), want, ip);
  equal(isIpLiteral("10.0.0.1"), true);
  equal(isIpLiteral("[fd00::1]"), true);
  equal(isIpLiteral("api.example.com"), false);
});

Deno.test("egressAddress uses only a public answer for a host name and an IP literal as is", async () => {
  const dns: Record<string, string[]> = {
    "rebound.test": ["127.0.0.1", "10.0.0.5", "fe80::1"],
    "mixed.test": ["10.0.0.5", "93.184.215.14"],
  };
  const resolve = (h: string) => Promise.resolve(dns[h] ?? []);
  equal(await egressAddress("mixed.test", resolve), "93.184.215.14");
  await rejects(
    egressAddress("rebound.test", resolve),
    (e: unknown) =>
      e instanceof IsbError && e.code === "forbidden" &&
      e.message ===
        'connect upstream "rebound.test": it resolves to no public address (127.0.0.1, 10.0.0.5, fe80::1)',
  );
  await rejects(egressAddress("nothing.test", resolve), /no public address \(none\)/);
  // A literal address was allowed as such by the allow-list: no lookup, no filter.
  equal(
    await egressAddress("10.0.0.7", () => Promise.reject(new TypeError("no lookup"))),
    "10.0.0.7",
  );
});

Deno.test("embeddedV4 finds the IPv4 an IPv6 form leads to", () => {
  equal(embeddedV4("::ffff:10.77.0.5"), "10.77.0.5");
  equal(embeddedV4("::ffff:a4d:5"), "10.77.0.5");
  equal(embeddedV4("64:ff9b::a4d:5"), "10.77.0.5");
  equal(embeddedV4("2002:a4d:5::1"), "10.77.0.5");
  equal(embeddedV4("2001:db8::1"), undefined);
  equal(embeddedV4("10.77.0.5"), undefined);
});

Deno.test("parseCidr and inCidr match IPv4 and IPv6 ranges, mapped forms included", () => {
  const v4 = parseCidr("10.77.0.1/24")!;
  equal(inCidr("10.77.0.200", v4), true);
  equal(inCidr("10.77.1.1", v4), false);
  equal(inCidr("::ffff:10.77.0.9", v4), true);
  const v6 = parseCidr("fd42:1:2:3::1/64")!;
  equal(inCidr("fd42:1:2:3:ffff::9", v6), true);
  equal(inCidr("fd42:1:2:4::9", v6), false);
  equal(inCidr("10.77.0.1", v6), false);
  equal(inCidr("203.0.113.77", parseCidr("203.0.113.77")!), true);
  equal(inCidr("203.0.113.78", parseCidr("203.0.113.77")!), false);
  equal(inCidr("1.2.3.4", parseCidr("0.0.0.0/0")!), true);
  for (const bad of ["10.0.0.0/33", "fd00::/129", "10.0.0.0/-1", "10.0.0.0/1x", "nope/8", ""]) {
    equal(parseCidr(bad), undefined, bad);
  }
});

Deno.test("targetAllowed refuses special addresses, the host's own and its subnets", () => {
  const rules = {
    own: new Set(["198.51.99.7", "2a01:4f8::7"]),
    subnets: [
      parseCidr("10.77.0.1/24")!,
      parseCidr("203.0.114.0/24")!,
      parseCidr("2a01:4f9::/32")!,
    ],
  };
  const CASES: [string, boolean][] = [
    ["8.8.8.8", true],
    ["2a00:1450:4001::1", true],
    ["10.77.0.1", false], // the bridge gateway
    ["10.77.0.44", false], // another instance
    ["192.168.1.20", false], // the LAN
    ["100.100.100.100", false], // CGNAT (tailnets)
    ["fd42::5", false],
    ["fe80::1", false],
    ["169.254.169.254", false],
    ["127.0.0.1", false],
    ["::1", false],
    ["0.0.0.0", false],
    ["::", false],
    ["255.255.255.255", false],
    ["224.0.0.251", false],
    ["198.51.99.7", false], // the host's own (public) address
    ["::ffff:198.51.99.7", false],
    ["2002:c633:6307::1", false], // 6to4 of the host's own address
    ["64:ff9b::c633:6307", false], // NAT64 of it
    ["2a01:4f8::7", false],
    ["203.0.114.9", false], // a public bridge subnet
    ["::ffff:203.0.114.9", false],
    ["2a01:4f9:1::1", false],
    ["203.0.115.9", true],
  ];
  for (const [ip, want] of CASES) equal(targetAllowed(ip, rules), want, ip);
  equal(targetAllowed("127.0.0.1", { ...rules, allowLoopback: true }), true);
  equal(targetAllowed("10.77.0.44", { ...rules, allowLoopback: true }), false);
});

Deno.test("guardedAddresses checks IP literals unless told to use them as they are", async () => {
  const guard = {
    resolve: (h: string) =>
      Promise.resolve(h === "two.test" ? ["10.0.0.1", "8.8.8.8", "1.1.1.1"] : []),
    allows: isPublicAddress,
  };
  await rejects(
    guardedAddresses("10.0.0.7", guard),
    (e: unknown) => e instanceof IsbError && e.code === "forbidden",
  );
  await rejects(guardedAddresses("[::1]", guard), /not a public address/);
  equal((await guardedAddresses("8.8.4.4", guard))[0]!.text, "8.8.4.4");
  equal((await guardedAddresses("[::1]", { ...guard, literalsAsIs: true }))[0]!.text, "::1");
  equal((await guardedAddresses("two.test", guard)).map((a) => a.text).join(), "8.8.8.8,1.1.1.1");
  await rejects(
    guardedAddresses("x.test", { ...guard, resolve: () => Promise.reject(new TypeError("down")) }),
    (e: unknown) => e instanceof IsbError && e.code === "io" && /down/.test(e.message),
  );
});

Deno.test("publicGuard with the host's nets refuses its own public address and subnets", async () => {
  const nets = () => ({ own: new Set(["198.51.99.7"]), subnets: [parseCidr("203.0.114.0/24")!] });
  const dns: Record<string, string[]> = {
    "own.test": ["198.51.99.7"],
    "bridge.test": ["203.0.114.9"],
    "ok.test": ["203.0.114.9", "8.8.8.8"],
  };
  const guard = publicGuard((h) => Promise.resolve(dns[h] ?? []), nets);
  await rejects(guardedAddresses("own.test", guard), /no public address/);
  await rejects(guardedAddresses("bridge.test", guard), /no public address/);
  equal((await guardedAddresses("ok.test", guard)).map((a) => a.text).join(), "8.8.8.8");
  // Without the nets (tests of the egress relay alone) only special addresses are refused.
  const bare = publicGuard((h) => Promise.resolve(dns[h] ?? []));
  equal((await guardedAddresses("own.test", bare)).map((a) => a.text).join(), "198.51.99.7");
});
