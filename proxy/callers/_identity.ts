/**
 * Who owns a source address, and what that owner may be given (shared/spec/isx-mcp.md §7.B,
 * §4.2, §8). Pure: Incus's view of the instances in, decisions out.
 *
 * An address belongs to an instance by the NIC *configuration* Incus holds (`ipv4.address`
 * of a NIC device), never by what the guest reports, because root in a guest can put any
 * address on any interface. Only instances with no configured address at all (isb
 * sandboxes, a plain `incus launch`) fall back to what their guest reports, for addresses
 * no configuration names; such callers are counted but never given a credential. An
 * address two configurations name is nobody's, so is the configured address of a stopped
 * instance, and so is a reported address two running guests report.
 *
 * Credentials go only to an instance isx stamped itself (Incus `user.*` keys, which only
 * the host can write: the guest API is read-only) whose every NIC is pinned: a fixed
 * address with `security.ipv4_filtering`, `security.ipv6_filtering` and
 * `security.mac_filtering`, and a MAC Incus chose (`volatile.<nic>.hwaddr`): its filters keep
 * it from sending as anyone else, and the proxy's bridge guard (proxy/callers/guard.ts) keeps every
 * other port from sending as it. Then: an instance (`type=instance`) of a template built from
 * trusted layers only (`trusted=true`, a build id) gets every credential; a build container
 * (`type=build`, `trusted=true`) gets the namespaces its definition declares
 * (`credentials=github,…`); everything else gets none, its placeholders relayed untouched.
 *
 * @module
 */

import type { Instance, InstanceState } from "../../rpc/base.ts";
import type { BridgePort, GuardEntry } from "./guard.ts";
import { type Grant, GRANT_NAMES, type GrantName } from "../config/policy.ts";

/** The stamp prefix isx writes on instances (isx-mcp.md §4.2). */
export const STAMP = "user.incus-spawn.";

/** The NIC keys that must all be `true` for a NIC to count as pinned. */
export const PIN_FILTERS = [
  "security.ipv4_filtering",
  "security.ipv6_filtering",
  "security.mac_filtering",
] as const;

/** What the proxy needs to know about one instance. */
export interface InstanceInfo {
  /** `name`, or `project/name` outside the default project. */
  name: string;
  /** Incus `created_at`: the incarnation counters belong to. */
  created_at: string;
  /** Whether the instance runs now. */
  running: boolean;
  /** Addresses the guest reports on any interface but `lo`, normalised (not trusted). */
  addresses: string[];
  /** Addresses its NICs' configuration names (`ipv4.address`, `ipv6.address`). */
  nicAddresses: string[];
  /** What it may be given when identified by configuration. */
  grant: Grant;
  /** Its running NICs with configured addresses, for the bridge guard (proxy/callers/guard.ts). */
  guard?: GuardEntry[];
  /** Its running NICs' host-side ports and bridges, configured or not (the guard's ports). */
  ports?: BridgePort[];
  /** Hex SHA-256 of the per-start instance secret, when stamped. */
  secretSha256?: string;
  /** Account pins per provider namespace (`user.incus-spawn.account.<ns>`). */
  pins: Record<string, string>;
  /** Its template's `accounts:` (`user.incus-spawn.template-account.<ns>`). */
  templateAccounts?: Record<string, string>;
  /**
   * Its coordinator grant (`user.incus-spawn.mcp-caller`, 32 hex), only for an isx instance
   * whose every NIC is pinned (proxy/mcp_endpoint/: who may reach isx mcp).
   */
  mcpCaller?: string;
  /** An unclaimed warm-pool member (`mcp-pool` stamped): nobody's, given and counted nothing. */
  pooled?: true;
}

/** An address's owner, and whether the owner's configuration names the address. */
export interface Owner {
  /** The instance. */
  info: InstanceInfo;
  /** True when the NIC configuration names the address (else the guest reported it). */
  byConfig: boolean;
}

/** `::ffff:10.0.0.1` → `10.0.0.1`; lower case; zone ids dropped. */
export function normalizeAddress(a: string): string {
  let s = a.trim().toLowerCase().replace(/^\[|\]$/g, "");
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  return s.startsWith("::ffff:") && s.includes(".") ? s.slice(7) : s;
}

function claims(
  instances: readonly InstanceInfo[],
  of: (i: InstanceInfo) => readonly string[],
): Map<string, InstanceInfo[]> {
  const out = new Map<string, InstanceInfo[]>();
  for (const i of instances) {
    for (const a of new Set(of(i).map(normalizeAddress))) {
      const list = out.get(a) ?? [];
      list.push(i);
      out.set(a, list);
    }
  }
  return out;
}

/**
 * Address → owner: a configured address with one claimant is its while it runs (a stopped
 * owner sends nothing, so whoever sends from it is an impostor); two claimants, nobody's.
 * Reported addresses count only from instances with no configured address, only where no
 * configuration names them, and only with one claimant or one running claimant.
 */
export function addressMap(instances: readonly InstanceInfo[]): Map<string, Owner> {
  const configured = claims(instances, (i) => i.nicAddresses);
  const out = new Map<string, Owner>();
  for (const [a, list] of configured) {
    if (list.length === 1 && list[0]!.running) out.set(a, { info: list[0]!, byConfig: true });
  }
  const reported = claims(instances, (i) => i.nicAddresses.length ? [] : i.addresses);
  for (const [a, list] of reported) {
    if (configured.has(a)) continue;
    const running = list.filter((i) => i.running);
    const owner = list.length === 1 ? list[0] : running.length === 1 ? running[0] : undefined;
    if (owner) out.set(a, { info: owner, byConfig: false });
  }
  return out;
}

function addressesOf(state: InstanceState | undefined | null): string[] {
  const out: string[] = [];
  for (const [dev, n] of Object.entries(state?.network ?? {})) {
    if (dev === "lo") continue;
    for (const a of n.addresses ?? []) {
      if (a.scope !== "local") out.push(normalizeAddress(a.address));
    }
  }
  return out;
}

/** True when every NIC is pinned (fixed address, the three filters, an Incus-chosen MAC). */
export function nicsPinned(
  devices: Readonly<Record<string, Record<string, string>>>,
  config: Readonly<Record<string, string>>,
): boolean {
  const nics = Object.entries(devices).filter(([, d]) => d.type === "nic");
  return nics.length > 0 &&
    nics.every(([name, d]) =>
      !!d["ipv4.address"] && PIN_FILTERS.every((k) => d[k] === "true") &&
      !!config[`volatile.${name}.hwaddr`]
    );
}

/** What an instance with these stamps and NICs may be given (see the module doc). */
export function grantOf(stamps: Readonly<Record<string, string>>, pinned: boolean): Grant {
  if (!pinned || stamps["trusted"] !== "true") return [];
  if (stamps["type"] === "instance" && stamps["build-id"]) return "all";
  if (stamps["type"] === "build") {
    const names = (stamps["credentials"] ?? "").split(",").map((s) => s.trim());
    return GRANT_NAMES.filter((n): n is GrantName => names.includes(n));
  }
  return [];
}

/** Maps one Incus instance (recursion=2, with `state`) to what the proxy needs. */
export function instanceInfo(i: Instance & { state?: InstanceState | null }): InstanceInfo {
  const config = { ...i.config, ...(i.expanded_config ?? {}) };
  const devices = { ...i.devices, ...(i.expanded_devices ?? {}) };
  const stamps: Record<string, string> = {};
  const pins: Record<string, string> = {};
  const templateAccounts: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    if (!k.startsWith(STAMP)) continue;
    stamps[k.slice(STAMP.length)] = v;
    if (k.startsWith(`${STAMP}account.`) && v) pins[k.slice(STAMP.length + 8)] = v;
    if (k.startsWith(`${STAMP}template-account.`) && v) {
      templateAccounts[k.slice(STAMP.length + 17)] = v;
    }
  }
  const configured = (d: Record<string, string>) =>
    [d["ipv4.address"], d["ipv6.address"]].filter((a): a is string => !!a).map(normalizeAddress);
  const nics = Object.entries(devices).filter(([, d]) => d.type === "nic");
  const nicAddresses = nics.flatMap(([, d]) => configured(d));
  const running = (i.state?.status ?? i.status) === "Running";
  const guard: GuardEntry[] = [];
  const ports: BridgePort[] = [];
  const pinned = nicsPinned(devices, config);
  for (const [nic, d] of running ? nics : []) {
    const port = config[`volatile.${nic}.host_name`];
    const mac = config[`volatile.${nic}.hwaddr`];
    // a managed network's bridge is named as the network; a bridged NIC names its parent (a
    // macvlan's parent is a host NIC, not a bridge: never guarded as one)
    const bridge = d["network"] || (d["nictype"] === "bridged" ? d["parent"] : undefined);
    if (port && bridge) ports.push({ port, bridge });
    if (port && mac && configured(d).length) {
      guard.push({
        port,
        mac,
        addresses: configured(d),
        ...(bridge ? { bridge } : {}),
        ...(pinned ? { pinned } : {}),
      });
    }
  }
  const project = i.project && i.project !== "default" ? `${i.project}/` : "";
  const info: InstanceInfo = {
    name: `${project}${i.name}`,
    created_at: i.created_at,
    running,
    addresses: addressesOf(i.state),
    nicAddresses,
    // an unclaimed warm-pool member is nobody's yet (mcp/pool/members.ts): no credential
    grant: stamps["mcp-pool"] ? [] : grantOf(stamps, pinned),
    pins,
    ...(Object.keys(templateAccounts).length ? { templateAccounts } : {}),
  };
  if (guard.length) info.guard = guard;
  if (ports.length) info.ports = ports;
  if (stamps["mcp-pool"]) info.pooled = true;
  const sha = stamps["instance-secret-sha256"];
  if (sha) info.secretSha256 = sha.toLowerCase();
  const caller = stamps["mcp-caller"];
  if (
    caller && /^[0-9a-f]{32}$/.test(caller) && stamps["type"] === "instance" &&
    nicsPinned(devices, config)
  ) info.mcpCaller = caller;
  return info;
}
