/**
 * A fixed, filtered address on every instance `isx branch` starts (shared/spec/isx-mcp.md
 * §7.B): the NIC gets `ipv4.address` from its bridge's subnet plus
 * `security.ipv4_filtering`, `security.ipv6_filtering` and `security.mac_filtering`, so
 * the bridge drops every frame, IP packet and ARP reply the guest sends with another
 * address or MAC, root or not, and the proxy can name the caller from the address Incus
 * holds in the NIC's configuration instead of the addresses the guest reports.
 *
 * Why not a lock: Incus itself refuses to start an instance whose static address another
 * NIC's configuration (running or not, any project) already names ("already defined on
 * another NIC"), so two branches racing for one address both fail to start and pick again
 * at random; {@link startPinned} retries that, which needs no host-wide state. A dynamic
 * lease that takes the address between the pick and the start makes dnsmasq give the guest
 * another one; {@link repinLeased} sees that and moves the pin. The filters
 * are bridge-family nftables rules without `ct state`, so they load on kernels without
 * bridge conntrack (checked on this host: docs/decisions.md).
 *
 * @module
 */

import { type Device, type IncusClient, IsbError } from "../../rpc/base.ts";
import { waitForIpv4 } from "../host/waits.ts";

/** The NIC keys that make the bridge drop what a guest sends under another identity. */
export const NIC_FILTERS: Readonly<Record<string, string>> = {
  "security.ipv4_filtering": "true",
  "security.ipv6_filtering": "true",
  "security.mac_filtering": "true",
};

/** How many addresses a branch tries before giving up (each costs one failed start). */
export const PIN_ATTEMPTS = 6;

function toInt(ip: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return undefined;
  return ((parts[0]! << 24) >>> 0) + (parts[1]! << 16) + (parts[2]! << 8) + parts[3]!;
}

function toIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

/**
 * A free address of the bridge subnet `cidr` (its `ipv4.address`, `10.77.0.1/24`): not
 * the network, broadcast or gateway address, nor in `taken`. Random, so racing branches
 * rarely pick alike. Pure but for `random`.
 */
export function pickAddress(
  cidr: string,
  taken: ReadonlySet<string>,
  random: () => number = Math.random,
): string {
  const [gw = "", bits = ""] = cidr.split("/");
  const gateway = toInt(gw);
  const prefix = Number(bits);
  if (gateway === undefined || !/^\d+$/.test(bits) || prefix < 8 || prefix > 30) {
    throw new IsbError("invalid", `pin an address in "${cidr}": expected an IPv4 A.B.C.D/8..30`);
  }
  const size = 2 ** (32 - prefix);
  const base = gateway - (gateway % size);
  const free = (n: number) => n !== gateway && !taken.has(toIp(n));
  const first = base + 1;
  const count = size - 2;
  for (let i = 0; i < 32; i++) {
    const n = first + Math.floor(random() * count);
    if (free(n)) return toIp(n);
  }
  const start = Math.floor(random() * count);
  for (let i = 0; i < count; i++) {
    const n = first + ((start + i) % count);
    if (free(n)) return toIp(n);
  }
  throw new IsbError("invalid", `pin an address in "${cidr}": every address is taken`);
}

/** The NIC `base` with a fixed address and the filters. */
export function pinnedNic(base: Device, address: string): Device {
  return { ...base, "ipv4.address": address, ...NIC_FILTERS };
}

/** True for Incus's refusal to start a NIC whose address another NIC names. */
export function isAddressConflict(e: unknown): boolean {
  return e instanceof IsbError && /already defined on another NIC/i.test(e.message);
}

interface ListedInstance {
  expanded_devices?: Record<string, Device> | null;
  devices?: Record<string, Device> | null;
}

/**
 * Addresses on `network` that are spoken for: NIC configurations (every project) and DHCP
 * leases. Incus answers a network's leases per project (only the leases of that project's
 * instances), so every project is asked: a dynamic lease of an instance in another project
 * (an isb sandbox, a test lab's instance) holds its address as firmly as a pin, and dnsmasq
 * would give a branch pinned to it a dynamic address instead (seen in CI).
 */
export function takenAddresses(client: IncusClient, network: string): Promise<Set<string>> {
  return beginAddressListing(client).taken(network);
}

/**
 * The network-independent half of {@link takenAddresses} (every project's NICs and the
 * projects), asked for now; `taken(network)` adds the network's leases. A caller that does not
 * yet know the network (the CLI, before the template is read) starts this at once.
 */
export function beginAddressListing(client: IncusClient): {
  taken(network: string): Promise<Set<string>>;
} {
  const h = client.withProject("default");
  const both = Promise.all([
    h.call("GET", "/1.0/instances", { query: { recursion: 1, "all-projects": true } }),
    h.call("GET", "/1.0/projects", {}),
  ]);
  both.catch(() => {}); // a caller that never asks sees no unhandled rejection
  return { taken: async (network) => takenOn(client, network, await both) };
}

async function takenOn(
  client: IncusClient,
  network: string,
  [list, projects]: readonly [{ metadata?: unknown }, { metadata?: unknown }],
): Promise<Set<string>> {
  const names = ((projects.metadata ?? []) as string[]).map((u) =>
    decodeURIComponent(u.slice(u.lastIndexOf("/") + 1))
  );
  const path = `/1.0/networks/${encodeURIComponent(network)}/leases`;
  const leases = await Promise.all(
    (names.length ? names : ["default"]).map((p) =>
      // a project that cannot see the network has no leases on it
      client.withProject(p).call("GET", path, {}).then((r) => r.metadata, () => [])
    ),
  );
  const out = new Set<string>();
  for (const i of (list.metadata ?? []) as ListedInstance[]) {
    for (const d of Object.values({ ...i.devices, ...i.expanded_devices })) {
      if (d.type === "nic" && d.network === network && d["ipv4.address"]) {
        out.add(d["ipv4.address"]);
      }
    }
  }
  for (const l of leases.flat() as { address?: string }[]) {
    if (l?.address) out.add(l.address);
  }
  return out;
}

/** The bridge's `ipv4.address` (`10.77.0.1/24`), which a pinned address must lie in. */
export async function bridgeCidr(client: IncusClient, network: string): Promise<string> {
  const cidr = (await client.withProject("default").getNetwork(network)).value.config[
    "ipv4.address"
  ];
  if (!cidr || !cidr.includes("/")) {
    throw new IsbError(
      "invalid",
      `pin an address on network "${network}": it has no IPv4 subnet (ipv4.address is "${
        cidr ?? ""
      }")`,
    );
  }
  return cidr;
}

/** What {@link startPinned} needs to move a NIC to another address. */
export interface PinnedStart {
  /** The instance. */
  name: string;
  /** The NIC device name. */
  device: string;
  /** The network the NIC is on. */
  network: string;
  /** The address the instance was created with. */
  address: string;
  /** The stamp key that records it. */
  stampKey: string;
  /** Starts the instance (throws Incus's refusal). */
  start(): Promise<void>;
}

/**
 * Starts an instance created with a pinned NIC; while Incus refuses because another NIC
 * names the address (a racing branch), moves to another free one and starts again.
 * Returns the address it started with.
 */
export async function startPinned(client: IncusClient, p: PinnedStart): Promise<string> {
  let address = p.address;
  for (let attempt = 1;; attempt++) {
    try {
      await p.start();
      return address;
    } catch (e) {
      if (!isAddressConflict(e) || attempt >= PIN_ATTEMPTS) throw e;
    }
    const cidr = await bridgeCidr(client, p.network);
    const taken = await takenAddresses(client, p.network);
    taken.add(address);
    address = pickAddress(cidr, taken);
    const next = address;
    await client.updateInstance(p.name, (i) => {
      i.devices = { ...i.devices, [p.device]: { ...i.devices[p.device]!, "ipv4.address": next } };
      i.config = { ...i.config, [p.stampKey]: next };
    }, { step: `move ${p.name} to address ${next}` });
  }
}

/** What {@link repinLeased} needs besides {@link PinnedStart}. */
export interface PinnedRestart extends PinnedStart {
  /** Waits for the guest's IPv4 address (default: {@link waitForIpv4}). */
  ipv4?(): Promise<string>;
}

/**
 * The guest came up with `got`, not its pinned `p.address`: dnsmasq found the pin leased
 * to another client (a dynamic lease taken between the pick and the start) and gave a
 * dynamic address, from which the filters drop everything the guest sends. Moves the NIC
 * to another free address and starts again until the guest holds its pin. Returns the
 * address and how many restarts it took (a restart empties /run: the caller delivers the
 * secret again).
 */
export async function repinLeased(
  client: IncusClient,
  p: PinnedRestart,
  got: string,
): Promise<{ address: string; restarts: number }> {
  let address = p.address;
  const ipv4 = p.ipv4 ?? (() => waitForIpv4(client, p.name));
  for (let restarts = 1;; restarts++) {
    // forcibly: it has not been handed to anybody yet
    await client.stopInstance(p.name, { step: `stop ${p.name}`, force: true });
    const [cidr, taken] = await Promise.all([
      bridgeCidr(client, p.network),
      takenAddresses(client, p.network),
    ]);
    taken.add(address).add(got);
    const next = pickAddress(cidr, taken);
    await client.updateInstance(p.name, (i) => {
      i.devices = { ...i.devices, [p.device]: { ...i.devices[p.device]!, "ipv4.address": next } };
      i.config = { ...i.config, [p.stampKey]: next };
    }, { step: `move ${p.name} to address ${next} (${address} is leased to another client)` });
    address = await startPinned(client, { ...p, address: next });
    got = await ipv4();
    if (got === address) return { address, restarts };
    if (restarts >= PIN_ATTEMPTS) {
      throw new IsbError(
        "not_ready",
        `pin an address for "${p.name}" on "${p.network}": after ${restarts} tries the guest still took another (${got} for ${address}); see \`incus network list-leases ${p.network}\``,
      );
    }
  }
}

/** The pinned NIC a new instance gets, and the address in it. */
export interface PinPlan {
  /** The network of the NIC. */
  network: string;
  /** The NIC with its address and the filters. */
  nic: Device;
  /** The address. */
  address: string;
}

/** What a pin is picked from: a network's subnet and the addresses spoken for on it. */
export interface AddressListing {
  /** The network. */
  network: string;
  /** Its `ipv4.address` ({@link bridgeCidr}). */
  cidr: string;
  /** {@link takenAddresses}. */
  taken: Set<string>;
}

/**
 * Lists `network`'s subnet and taken addresses (with `begun`, from a listing started before the
 * network was known). A caller that knows the network early (the CLI, once it read the
 * template) starts it then and hands it to {@link planPin}: a listing a moment older is no
 * weaker, since a race for an address is caught at start either way.
 */
export async function listAddresses(
  client: IncusClient,
  network: string,
  begun: ReturnType<typeof beginAddressListing> = beginAddressListing(client),
): Promise<AddressListing> {
  const [cidr, taken] = await Promise.all([bridgeCidr(client, network), begun.taken(network)]);
  return { network, cidr, taken };
}

/**
 * A pinned copy of `base` (a NIC on a managed network) with a free address of its bridge,
 * from `listed` when it is of that network (started earlier), else from a listing now.
 */
export async function planPin(
  client: IncusClient,
  base: Device,
  what: string,
  listed?: Promise<AddressListing | undefined>,
): Promise<PinPlan> {
  const network = base.network;
  if (base.type !== "nic" || !network) {
    throw new IsbError(
      "invalid",
      `${what}: eth0 is not a NIC on a managed network, so isx cannot pin its address: attach it to an Incus bridge`,
    );
  }
  const early = await listed?.catch(() => undefined);
  const { cidr, taken } = early?.network === network ? early : await listAddresses(client, network);
  const address = pickAddress(cidr, taken);
  return { network, nic: pinnedNic(base, address), address };
}
