/**
 * Pinned addresses against the real Incus: a NIC whose address another NIC's configuration
 * already names is refused at start, and {@link startPinned} moves it to a free one and
 * starts it; the guest gets the address its configuration names.
 */

import { equal, notEqual, ok } from "node:assert/strict";
import { createIncusClient } from "../../rpc/mod.ts";
import {
  bridgeCidr,
  pickAddress,
  pinnedNic,
  startPinned,
  takenAddresses,
} from "../../mcp/instances/static_ip.ts";
import { startLong } from "../../mcp/host/waits.ts";
import {
  LIVE_BRIDGE,
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { addressOf } from "./_pinned.ts";

Deno.test({
  name: "startPinned moves a branch off an address another NIC names and starts it",
  ignore: NO_INCUS,
  async fn() {
    const incus = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
    const [x, y] = [testName("pinx"), testName("piny")];
    try {
      const [cidr, taken] = await Promise.all([
        bridgeCidr(incus, LIVE_BRIDGE),
        takenAddresses(incus, LIVE_BRIDGE),
      ]);
      const q = pickAddress(cidr, taken);
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
