import { deepStrictEqual as assertEquals, equal, ok, throws } from "node:assert/strict";
import { createIncusClient, IsbError } from "../../rpc/mod.ts";
import { startFakeIncusd } from "../../tests/fakes/incusd.ts";
import {
  isAddressConflict,
  listAddresses,
  NIC_FILTERS,
  pickAddress,
  pinnedNic,
  planPin,
} from "./static_ip.ts";

Deno.test("pickAddress never picks the network, gateway, broadcast or a taken address", () => {
  const taken = new Set(["10.77.0.5", "10.77.0.6"]);
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const a = pickAddress("10.77.0.1/24", taken);
    ok(/^10\.77\.0\.\d+$/.test(a), a);
    ok(!["10.77.0.0", "10.77.0.1", "10.77.0.255", ...taken].includes(a), a);
    seen.add(a);
  }
  ok(seen.size > 100, "picks spread over the subnet");
});

Deno.test("pickAddress finds the last free address and refuses a full subnet", () => {
  const taken = new Set<string>();
  for (let n = 2; n <= 254; n++) if (n !== 77) taken.add(`10.1.2.${n}`);
  equal(pickAddress("10.1.2.1/24", taken), "10.1.2.77");
  taken.add("10.1.2.77");
  throws(() => pickAddress("10.1.2.1/24", taken), /every address is taken/);
});

Deno.test("pickAddress handles a gateway that is not the first address, and small subnets", () => {
  // 192.168.5.252/30: .252 network, .255 broadcast, .254 the gateway: only .253 is left
  equal(pickAddress("192.168.5.254/30", new Set()), "192.168.5.253");
  throws(() => pickAddress("192.168.5.254/30", new Set(["192.168.5.253"])), /every address/);
  for (const bad of ["10.77.0.1", "10.77.0.1/31", "10.77.0/24", "300.1.1.1/24", "auto"]) {
    throws(() => pickAddress(bad, new Set()), IsbError, bad);
  }
});

Deno.test("pinnedNic keeps the NIC and adds the address and every filter", () => {
  const nic = pinnedNic({ type: "nic", network: "incusbr0", name: "eth0" }, "10.77.0.9");
  assertEquals(nic, {
    type: "nic",
    network: "incusbr0",
    name: "eth0",
    "ipv4.address": "10.77.0.9",
    "security.ipv4_filtering": "true",
    "security.ipv6_filtering": "true",
    "security.mac_filtering": "true",
  });
  equal(Object.keys(NIC_FILTERS).length, 3);
});

Deno.test("isAddressConflict recognises Incus's refusal only", () => {
  const msg =
    'Failed start validation for device "eth0": IP address "10.77.0.201" already defined on another NIC';
  ok(isAddressConflict(new IsbError("api", msg)));
  ok(!isAddressConflict(new IsbError("api", "Failed to start")));
  ok(!isAddressConflict(new Error(msg)));
});

Deno.test("planPin picks from a listing started earlier when it is of the NIC's network", async () => {
  // the fake's bridge is all taken but .9: a pick from it can only be .9; the earlier
  // listing (of br0) leaves only .7, so a pin of .7 came from it, with no request made
  const taken = new Set<string>();
  for (let n = 2; n <= 254; n++) if (n !== 9) taken.add(`10.5.0.${n}`);
  await using fake = await startFakeIncusd([
    { route: "GET /1.0/networks/br0", metadata: { config: { "ipv4.address": "10.5.0.1/24" } } },
    { route: "GET /1.0/instances", metadata: [] },
    { route: "GET /1.0/projects", metadata: ["/1.0/projects/default"] },
    {
      route: "GET /1.0/networks/br0/leases",
      metadata: [...taken].map((address) => ({ address })),
    },
  ]);
  const client = createIncusClient({ socket: fake.socket });
  try {
    const nic = { type: "nic", network: "br0" };
    const early = new Set<string>();
    for (let n = 2; n <= 254; n++) if (n !== 7) early.add(`10.5.0.${n}`);
    const listed = Promise.resolve({ network: "br0", cidr: "10.5.0.1/24", taken: early });
    equal((await planPin(client, nic, "x", listed)).address, "10.5.0.7");
    equal(fake.requests.length, 0);
    // of another network, or failed: listed again now
    const other = Promise.resolve({ network: "br1", cidr: "10.5.0.1/24", taken: early });
    equal((await planPin(client, nic, "x", other)).address, "10.5.0.9");
    equal((await planPin(client, nic, "x", Promise.reject(new Error("gone")))).address, "10.5.0.9");
    equal((await listAddresses(client, "br0")).taken.has("10.5.0.9"), false);
  } finally {
    client.close();
  }
});
