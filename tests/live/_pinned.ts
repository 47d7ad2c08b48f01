/**
 * Live-test instances shaped like what `isx branch` makes, without building a template: a
 * NIC pinned the way mcp/instances/static_ip.ts pins it (fixed address from the bridge's
 * free ones, the three filters) and, for a trusted one, the stamps of an instance of a
 * template built from trusted layers. The proxy's registry reads exactly these.
 *
 * @module
 */

import type { IncusClient } from "../../rpc/mod.ts";
import {
  listAddresses,
  pickAddress,
  pinnedNic,
  repinLeased,
} from "../../mcp/instances/static_ip.ts";
import { LIVE_BRIDGE, LIVE_IMAGE } from "../helpers/live.ts";
import { until } from "../helpers/live.ts";

/** The stamps the proxy trusts with credentials (with a pinned NIC). */
export const TRUSTED_STAMPS: Readonly<Record<string, string>> = {
  "user.incus-spawn.type": "instance",
  "user.incus-spawn.trusted": "true",
  "user.incus-spawn.build-id": "live-test",
};

export { until };

/** Waits for the guest's DHCP address on eth0. */
export function addressOf(incus: IncusClient, name: string, ms = 120_000): Promise<string> {
  return until(`an IPv4 address on ${name}`, async () => {
    const st = await incus.getInstanceState(name);
    return st.network?.eth0?.addresses.find((a) => a.family === "inet" && a.scope === "global")
      ?.address;
  }, ms);
}

/** A free address of `bridge`'s subnet, as a branch picks its pin. */
export async function freeAddress(incus: IncusClient, bridge = LIVE_BRIDGE): Promise<string> {
  const { cidr, taken } = await listAddresses(incus, bridge);
  return pickAddress(cidr, taken);
}

/**
 * Launches `name` from `image` on `bridge` with a pinned NIC (and `stamps`); returns its
 * address once the guest has it.
 */
export async function launchPinned(
  incus: IncusClient,
  name: string,
  opts: { stamps?: Record<string, string>; image?: string; bridge?: string } = {},
): Promise<string> {
  const bridge = opts.bridge ?? LIVE_BRIDGE;
  const address = await freeAddress(incus, bridge);
  await incus.createInstance({
    name,
    source: { type: "image", alias: opts.image ?? LIVE_IMAGE },
    config: { ...opts.stamps, "user.incus-spawn.static-ip": address },
    devices: { eth0: pinnedNic({ type: "nic", name: "eth0", network: bridge }, address) },
    start: true,
  }, { step: `launch ${name}` });
  const got = await addressOf(incus, name);
  if (got === address) return got;
  // dnsmasq gave a dynamic address: the pin was leased between the pick and the start
  const moved = await repinLeased(incus, {
    name,
    device: "eth0",
    network: bridge,
    address,
    stampKey: "user.incus-spawn.static-ip",
    start: () => incus.startInstance(name, { step: `start ${name}` }),
    ipv4: () => addressOf(incus, name),
  }, got);
  return moved.address;
}
