import { equal, rejects } from "node:assert/strict";
import { IsbError } from "../rpc/mod.ts";
import { egressAddress, isIpLiteral, isPublicAddress } from "./egress_guard.ts";

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
