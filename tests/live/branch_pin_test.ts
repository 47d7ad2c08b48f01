/**
 * Pinned addresses against the real Incus: a NIC whose address another NIC's configuration
 * already names is refused at start, and {@link startPinned} moves it to a free one and
 * starts it; the guest gets the address its configuration names. An address a dynamic lease
 * holds (in the lab's own project, not `default`) counts as taken, and a guest that came up
 * with a dynamic address because its pin was leased is moved by {@link repinLeased}. The
 * bridge's lease file is where `leaseFile` says, and names a pinned guest once it has its lease.
 */

import { equal, notEqual, ok } from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import {
  pinnedNic,
  repinLeased,
  startPinned,
  takenAddresses,
} from "../../mcp/instances/static_ip.ts";
import { startLong, waitForIpv4 } from "../../mcp/host/waits.ts";
import { leaseFile, watchLease } from "../../mcp/host/leases.ts";
import {
  LIVE_BRIDGE,
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
  until,
} from "../helpers/live.ts";
import { addressOf, freeAddress } from "./_pinned.ts";

Deno.test({
  name: "startPinned moves a branch off an address another NIC names and starts it",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const [x, y] = [testName("pinx"), testName("piny")];
    try {
      const q = await freeAddress(incus);
      const create = (name: string) =>
        incus.createInstance({
          name,
          source: { type: "image", alias: LIVE_IMAGE },
          config: { "user.incus-spawn.static-ip": q },
          devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: LIVE_BRIDGE }, q) },
        }, { step: `create ${name}` });
      await create(x); // holds q, stopped: Incus still counts it
      await create(y);
      ok((await takenAddresses(incus, LIVE_BRIDGE)).has(q), "a stopped NIC's address is taken");
      const got = await startPinned(incus, {
        name: y,
        device: "eth0",
        network: LIVE_BRIDGE,
        address: q,
        stampKey: "user.incus-spawn.static-ip",
        start: () => startLong(incus, y, `start ${y}`),
      });
      notEqual(got, q);
      const inst = (await incus.getInstance(y)).value;
      equal(inst.devices.eth0!["ipv4.address"], got);
      equal(inst.devices.eth0!["security.mac_filtering"], "true");
      equal(inst.config["user.incus-spawn.static-ip"], got);
      equal(await addressOf(incus, y), got);
    } finally {
      for (const n of [x, y]) await removeInstance(incus, n).catch(() => {});
      incus.close();
    }
  },
});

Deno.test({
  name: "a dynamic lease in the lab's project is taken, and a guest whose pin was leased is moved",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const [d, p] = [testName("pind"), testName("pinp")];
    try {
      // d takes a dynamic address, as an isb sandbox does
      await incus.createInstance({
        name: d,
        source: { type: "image", alias: LIVE_IMAGE },
        devices: { eth0: { type: "nic", name: "eth0", network: LIVE_BRIDGE } },
        start: true,
      }, { step: `launch ${d}` });
      const leased = await addressOf(incus, d);
      await until(
        `the lease of ${leased}`,
        async () => (await takenAddresses(incus, LIVE_BRIDGE)).has(leased) || undefined,
      );
      // p is pinned to d's address, as a branch that picked it a moment before d's lease was
      await incus.createInstance({
        name: p,
        source: { type: "image", alias: LIVE_IMAGE },
        config: { "user.incus-spawn.static-ip": leased },
        devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: LIVE_BRIDGE }, leased) },
        start: true,
      }, { step: `launch ${p}` });
      const got = await addressOf(incus, p);
      notEqual(got, leased, "dnsmasq does not hand out a leased address");
      const moved = await repinLeased(incus, {
        name: p,
        device: "eth0",
        network: LIVE_BRIDGE,
        address: leased,
        stampKey: "user.incus-spawn.static-ip",
        start: () => startLong(incus, p, `start ${p}`),
        ipv4: () => addressOf(incus, p),
      }, got);
      ok(moved.restarts >= 1);
      notEqual(moved.address, leased);
      const inst = (await incus.getInstance(p)).value;
      equal(inst.devices.eth0!["ipv4.address"], moved.address);
      equal(inst.config["user.incus-spawn.static-ip"], moved.address);
      equal(await addressOf(incus, p), moved.address, "the guest holds its new pin");
    } finally {
      for (const n of [d, p]) await removeInstance(incus, n).catch(() => {});
      incus.close();
    }
  },
});

Deno.test({
  name: "the bridge's lease file names a pinned guest once it is leased; the wait returns its pin",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const n = testName("pinl");
    try {
      const q = await freeAddress(incus);
      await incus.createInstance({
        name: n,
        source: { type: "image", alias: LIVE_IMAGE },
        devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: LIVE_BRIDGE }, q) },
      }, { step: `create ${n}` });
      // this Incus's layout: the file exists beside the socket (else every wait polls the state)
      const file = leaseFile(incus.where, LIVE_BRIDGE);
      ok(file !== undefined);
      const watch = watchLease(file, { name: n, address: q });
      ok(watch, `no readable lease file at ${file}`);
      equal(watch.state(), "waiting");
      await startLong(incus, n, `start ${n}`);
      equal(await waitForIpv4(incus, n, { lease: watch }), q);
      // dnsmasq wrote the lease before the guest held the address the state showed
      equal(watch.state(), "leased");
      ok(Deno.readTextFileSync(file).split("\n").some((l) => l.split(" ")[2] === q));
    } finally {
      await removeInstance(incus, n).catch(() => {});
      incus.close();
    }
  },
});
