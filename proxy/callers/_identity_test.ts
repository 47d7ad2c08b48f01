import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import type { Instance, InstanceState } from "../../rpc/mod.ts";
import { ClientRegistry } from "./clients.ts";
import {
  addressMap,
  grantOf,
  type InstanceInfo,
  instanceInfo,
  nicsPinned,
  PIN_FILTERS,
} from "./_identity.ts";

function info(name: string, o: Partial<InstanceInfo> = {}): InstanceInfo {
  return {
    name,
    created_at: "2026-12-01T00:00:00Z",
    running: true,
    addresses: [],
    nicAddresses: [],
    grant: [],
    pins: {},
    ...o,
  };
}

const FILTERED = Object.fromEntries(PIN_FILTERS.map((k) => [k, "true"]));

Deno.test("addressMap: an address the NIC configuration names beats any guest's report", () => {
  const b = info("b", { nicAddresses: ["10.77.0.20"], addresses: ["10.77.0.20"], grant: "all" });
  // a neighbour that put b's address on its lo and eth0
  const plain = info("plain", { addresses: ["10.77.0.20", "10.77.0.30"] });
  // a pinned neighbour that did the same: its reports count for nothing
  const a = info("a", { nicAddresses: ["10.77.0.10"], addresses: ["10.77.0.10", "10.77.0.20"] });
  const m = addressMap([plain, a, b]);
  assertEquals(m.get("10.77.0.20"), { info: b, byConfig: true });
  assertEquals(m.get("10.77.0.10"), { info: a, byConfig: true });
  assertEquals(m.get("10.77.0.30"), { info: plain, byConfig: false });
  equal(m.size, 3);
});

Deno.test("addressMap: a configured address of a stopped instance is nobody's", () => {
  const stopped = info("stopped", { nicAddresses: ["10.77.0.8"], running: false });
  const squatter = info("squatter", { addresses: ["10.77.0.8"] });
  equal(addressMap([stopped, squatter]).get("10.77.0.8"), undefined);
});

Deno.test("addressMap: an address two configurations name is nobody's", () => {
  const x = info("x", { nicAddresses: ["10.77.0.9"] });
  const y = info("y", { nicAddresses: ["10.77.0.9"], running: false });
  const z = info("z", { addresses: ["10.77.0.9"] });
  equal(addressMap([x, y, z]).get("10.77.0.9"), undefined);
});

Deno.test("addressMap: a reported address belongs to its one claimant or one running claimant", () => {
  const CASES: [InstanceInfo[], string | undefined][] = [
    [[info("p", { addresses: ["10.0.0.1"] })], "p"],
    [[info("p", { addresses: ["10.0.0.1"], running: false })], "p"],
    [[info("p", { addresses: ["10.0.0.1"] }), info("q", { addresses: ["10.0.0.1"] })], undefined],
    [[
      info("p", { addresses: ["10.0.0.1"] }),
      info("q", { addresses: ["10.0.0.1"], running: false }),
    ], "p"],
    [[info("p", { addresses: ["::ffff:10.0.0.1"] })], "p"],
  ];
  for (const [list, owner] of CASES) {
    const got = addressMap(list).get("10.0.0.1");
    equal(got?.info.name, owner, list.map((i) => i.name).join());
    if (got) equal(got.byConfig, false);
  }
});

Deno.test("nicsPinned needs a fixed address, all three filters and an Incus MAC on every NIC", () => {
  const nic = { type: "nic", network: "incusbr0", "ipv4.address": "10.77.0.5", ...FILTERED };
  const mac = { "volatile.eth0.hwaddr": "10:66:6a:00:00:01" };
  equal(nicsPinned({ eth0: nic, root: { type: "disk" } }, mac), true);
  equal(nicsPinned({}, mac), false);
  equal(nicsPinned({ eth0: nic }, {}), false);
  for (const k of ["ipv4.address", ...PIN_FILTERS]) {
    equal(nicsPinned({ eth0: { ...nic, [k]: "" } }, mac), false, k);
  }
  equal(nicsPinned({ eth0: { ...nic, "security.mac_filtering": "false" } }, mac), false);
  // a second, unpinned NIC is a way around the filters
  equal(
    nicsPinned({ eth0: nic, eth1: { type: "nic", network: "other" } }, {
      ...mac,
      "volatile.eth1.hwaddr": "10:66:6a:00:00:02",
    }),
    false,
  );
});

Deno.test("grantOf gives credentials only to pinned, trusted isx instances and builds", () => {
  const inst = { type: "instance", trusted: "true", "build-id": "abc" };
  const CASES: [Record<string, string>, boolean, unknown][] = [
    [inst, true, "all"],
    [inst, false, []],
    [{ ...inst, trusted: "false" }, true, []],
    [{ ...inst, trusted: "" }, true, []],
    [{ type: "instance", trusted: "true" }, true, []],
    [{ ...inst, type: "base" }, true, []],
    [{}, true, []],
    [{ type: "build", trusted: "true", credentials: "github" }, true, ["github"]],
    [{ type: "build", trusted: "true", credentials: "openai, custom,bogus" }, true, [
      "openai",
      "custom",
    ]],
    [{ type: "build", trusted: "true" }, true, []],
    [{ type: "build", trusted: "false", credentials: "github" }, true, []],
    [{ type: "build", trusted: "true", credentials: "github" }, false, []],
  ];
  for (const [stamps, pinned, want] of CASES) {
    assertEquals(grantOf(stamps, pinned), want, JSON.stringify([stamps, pinned]));
  }
});

function incusInstance(o: {
  name: string;
  config?: Record<string, string>;
  devices?: Record<string, Record<string, string>>;
  reported?: string[];
}): Instance & { state: InstanceState } {
  return {
    name: o.name,
    project: "default",
    status: "Running",
    created_at: "2026-12-01T00:00:00Z",
    config: o.config ?? {},
    devices: {},
    expanded_config: o.config ?? {},
    expanded_devices: o.devices ?? { eth0: { type: "nic", network: "incusbr0", name: "eth0" } },
    state: {
      status: "Running",
      network: {
        lo: { addresses: [{ family: "inet", address: "127.0.0.1", scope: "local" }] },
        eth0: {
          addresses: (o.reported ?? []).map((address) => ({
            family: "inet",
            address,
            scope: "global",
          })),
        },
      },
    },
  } as unknown as Instance & { state: InstanceState };
}

const TRUSTED = {
  "user.incus-spawn.type": "instance",
  "user.incus-spawn.trusted": "true",
  "user.incus-spawn.build-id": "b1",
  "volatile.eth0.hwaddr": "10:66:6a:00:00:01",
};

Deno.test("ClientRegistry names callers from NIC configuration and grants only by it", async () => {
  const pinnedNic = { type: "nic", network: "incusbr0", "ipv4.address": "10.77.0.20", ...FILTERED };
  const list = [
    incusInstance({ name: "b", config: TRUSTED, devices: { eth0: pinnedNic }, reported: [] }),
    // stamped like a trusted instance, but its NIC is not pinned: counted, never given a key
    incusInstance({ name: "old", config: TRUSTED, reported: ["10.77.0.40"] }),
    // root in a plain container added b's address and its own
    incusInstance({ name: "evil", reported: ["10.77.0.20", "10.77.0.30"] }),
  ];
  const reg = new ClientRegistry({ listInstances: () => Promise.resolve(list.map(instanceInfo)) }, {
    now: () => 0,
  });
  await reg.refresh();
  const who = async (hostname: string) => {
    const c = await reg.identify({ hostname, port: 1 });
    return c && [c.name, c.grant];
  };
  assertEquals(await who("10.77.0.20"), ["b", "all"]);
  assertEquals(await who("::ffff:10.77.0.20"), ["b", "all"]);
  assertEquals(await who("10.77.0.30"), ["evil", []]);
  assertEquals(await who("10.77.0.40"), ["old", []]);
  equal(await who("10.77.0.99"), undefined);
  await reg.close();
});

Deno.test("ClientRegistry.refresh during a listing lists once more after it, shared by every such call", async () => {
  let calls = 0;
  let release!: () => void;
  const first = new Promise<void>((r) => (release = r));
  const reg = new ClientRegistry({
    async listInstances() {
      const n = ++calls;
      if (n === 1) await first; // read before the instance below existed
      return n === 1 ? [] : [info("late", { nicAddresses: ["10.77.0.50"] })];
    },
  }, { now: () => 0 });
  const a = reg.refresh();
  const b = reg.refresh(); // an Incus event arrived while the first listing ran
  const c = reg.refresh();
  release();
  await Promise.all([a, b, c]);
  equal(calls, 2, "one more listing, not one per call");
  assertEquals(reg.known()?.map((r) => r.name), ["late"]);
  await reg.close();
});
