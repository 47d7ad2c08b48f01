/**
 * The bridge guard: host-side nftables rules that make every frame a bridge port sends one
 * the guard can parse, and keep every port from sending as a running instance with a
 * configured address. `isx branch` pins its instances' NICs (fixed address plus Incus's
 * `security.*_filtering`), which stops *them* from forging anyone; but an instance isx did
 * not make (a plain `incus copy`, an isb sandbox) has no filters, and as root it could take a
 * pinned instance's address and MAC, answer ARP for it, and call the proxy as that instance.
 *
 * A deny-list alone is the wrong shape: an 802.1Q or 802.1ad tag (VID 0 included, which the
 * host strips) moves the ether type, so `arp saddr ip` and `ip saddr` no longer match the
 * frame the host then reads (issue 18). So, for every bridge that carries a guarded NIC:
 *
 * - from each of its ports Incus lists (every running instance's NIC on it, any project),
 *   frames whose ether type is not IPv4, ARP or IPv6 are dropped, tagged ones included;
 * - a `netdev` ingress chain on the bridge device itself drops the same frames on their way
 *   to the host, so a port the last listing did not know yet (an instance that just started)
 *   still cannot reach the proxy with a frame the rules cannot parse;
 * - a pinned NIC's port may send only its own MAC, its own addresses (`0.0.0.0` and
 *   link-local IPv6 too, which name nobody) and ARP for them: an allow-list per port;
 * - no other port, on any bridge, may send its MAC, its addresses or ARP claiming them.
 *
 * Two tables of one name (`bridge isx_guard`, `netdev isx_guard`), stateless rules only (no
 * `ct state`, so kernels without bridge conntrack load them: the same reason isx's ACLs sit
 * on bridges, docs/decisions.md). Both are replaced whole and atomically (one `nft -f`
 * transaction) whenever the registry's listing changes them, before that listing names any
 * caller, and removed when the proxy stops (stale rules would block a later owner of an
 * address). Writing them needs CAP_NET_ADMIN: a proxy without it logs that the guard is off.
 * `meta ibrname` would name a bridge's ports without a listing, but kernels without
 * `CONFIG_NFT_BRIDGE_META` (this host's) refuse it.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";

/** The guard's nftables tables (families `bridge` and `netdev`). */
export const GUARD_TABLE = "isx_guard";

/** One running NIC to guard: its host-side port, its MAC and its configured addresses. */
export interface GuardEntry {
  /** The host side of the NIC (`volatile.<nic>.host_name`). */
  port: string;
  /** Its MAC (`volatile.<nic>.hwaddr`). */
  mac: string;
  /** The addresses its configuration names. */
  addresses: string[];
  /** The bridge it is on (the NIC's `network` or `parent`), when known. */
  bridge?: string;
  /** True when the NIC is pinned (Incus filters on): its port gets an allow-list. */
  pinned?: boolean;
}

/** One running NIC's host-side port and the bridge it is on (every instance, guarded or not). */
export interface BridgePort {
  /** The host side of the NIC (`volatile.<nic>.host_name`). */
  port: string;
  /** The bridge (the NIC's `network` or `parent`). */
  bridge: string;
}

const NAME_RE = /^[A-Za-z0-9_.-]{1,15}$/;
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const V4_RE = /^\d{1,3}(\.\d{1,3}){3}$/;
const V6_RE = /^[0-9a-f:]+$/;

/** The ether types a guarded bridge's ports may send; everything else (VLAN tags too) drops. */
const PARSED = "ether type != { ip, arp, ip6 } drop";

const quote = (names: Iterable<string>) => [...names].map((n) => `"${n}"`).join(", ");

/**
 * Both tables as one `nft -f` script: created if missing, deleted, written anew (so the
 * swap is one transaction). `ports` are every running NIC Incus lists, for the bridges the
 * guarded entries are on. Values that do not look like a port, bridge, MAC or address are
 * left out, so nothing from Incus reaches nft unchecked. `device: false` leaves the `netdev`
 * table out (untouched), for a kernel that refuses it. Pure.
 */
export function guardScript(
  entries: readonly GuardEntry[],
  table = GUARD_TABLE,
  ports: readonly BridgePort[] = [],
  opts: { device?: boolean } = {},
): string {
  const pre: string[] = [];
  const own: string[][] = [];
  const deny: string[] = [];
  const bridges = new Set<string>();
  const tagged = new Set<string>();
  for (const e of entries) {
    const mac = e.mac.toLowerCase();
    if (!NAME_RE.test(e.port) || !MAC_RE.test(mac)) continue;
    const v4 = e.addresses.map((x) => x.toLowerCase()).filter((a) => V4_RE.test(a));
    const v6 = e.addresses.map((x) => x.toLowerCase()).filter((a) =>
      V6_RE.test(a) && a.includes(":")
    );
    if (e.bridge !== undefined && NAME_RE.test(e.bridge)) {
      bridges.add(e.bridge);
      tagged.add(e.port);
    }
    if (e.pinned) {
      const chain = [
        PARSED,
        `ether saddr != ${mac} drop`,
        `arp saddr ether != ${mac} drop`,
        `arp saddr ip != { ${[...v4, "0.0.0.0"].join(", ")} } drop`,
        `ip saddr != { ${[...v4, "0.0.0.0"].join(", ")} } drop`,
      ];
      if (v6.length) chain.push(`ip6 saddr != { ${[...v6, "::", "fe80::/10"].join(", ")} } drop`);
      pre.push(`iifname "${e.port}" jump own_${own.length}`);
      own.push(chain);
    }
    const other = `iifname != "${e.port}"`;
    deny.push(`${other} ether saddr ${mac} drop`, `${other} arp saddr ether ${mac} drop`);
    for (const a of v4) deny.push(`${other} ip saddr ${a} drop`, `${other} arp saddr ip ${a} drop`);
    for (const a of v6) deny.push(`${other} ip6 saddr ${a} drop`);
  }
  for (const p of ports) {
    if (bridges.has(p.bridge) && NAME_RE.test(p.port)) tagged.add(p.port);
  }
  const rules = [
    ...(tagged.size ? [`iifname { ${quote([...tagged].sort())} } ${PARSED}`] : []),
    ...pre,
    ...deny,
  ];
  const device = opts.device === false ? [] : [
    `table netdev ${table} {`,
    ...[...bridges].sort().flatMap((b, i) => [
      `\tchain up_${i} {`,
      `\t\ttype filter hook ingress device "${b}" priority -300; policy accept;`,
      `\t\t${PARSED}`,
      `\t}`,
    ]),
    `}`,
  ];
  return [
    `table bridge ${table}`,
    `delete table bridge ${table}`,
    ...(opts.device === false ? [] : [`table netdev ${table}`, `delete table netdev ${table}`]),
    `table bridge ${table} {`,
    `\tchain pre {`,
    `\t\ttype filter hook prerouting priority -300; policy accept;`,
    ...rules.map((r) => `\t\t${r}`),
    `\t}`,
    ...own.flatMap((c, i) => [`\tchain own_${i} {`, ...c.map((r) => `\t\t${r}`), `\t}`]),
    `}`,
    ...device,
    "",
  ].join("\n");
}

/** The script that removes both tables (if present). */
export function guardRemoveScript(table = GUARD_TABLE, opts: { device?: boolean } = {}): string {
  const bridge = `table bridge ${table}\ndelete table bridge ${table}\n`;
  return opts.device === false
    ? bridge
    : `${bridge}table netdev ${table}\ndelete table netdev ${table}\n`;
}

/** Runs one `nft -f -` script (throws with nft's message on failure). */
export type NftRunner = (script: string) => Promise<void>;

/** Runs scripts through the `nft` binary. */
export function nftBinary(): NftRunner {
  return async (script) => {
    const child = new Deno.Command("nft", {
      args: ["-f", "-"],
      stdin: "piped",
      stdout: "null",
      stderr: "piped",
      // a stuck nft must not hold the registry's listing (and so every new caller) for long
      signal: AbortSignal.timeout(10_000),
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(script));
    await w.close();
    const out = await child.output();
    if (!out.success) {
      throw new TypeError(`nft: ${new TextDecoder().decode(out.stderr).trim().slice(0, 300)}`);
    }
  };
}

/** Keeps the guard table equal to the latest listing. */
export class BridgeGuard {
  readonly #run: NftRunner;
  readonly #table: string;
  #applied: string | undefined;
  #failed = false;

  /** Creates it (`table`: tests use their own); nothing is written until a sync. */
  constructor(run: NftRunner, table: string = GUARD_TABLE) {
    if (!/^[a-z][a-z0-9_]{0,30}$/.test(table)) throw new TypeError(`guard table "${table}"`);
    this.#run = run;
    this.#table = table;
  }

  /** True once a table has been written and not removed since. */
  get active(): boolean {
    return this.#applied !== undefined;
  }

  /**
   * Writes the tables for `entries` (and `ports`, every running NIC's port and bridge) if
   * they differ from the last ones written.
   */
  async sync(entries: readonly GuardEntry[], ports: readonly BridgePort[] = []): Promise<void> {
    const script = guardScript(entries, this.#table, ports);
    if (script === this.#applied) return;
    let error: unknown;
    try {
      await this.#run(script);
      this.#applied = script;
      if (this.#failed) log.info("proxy: bridge guard installed");
      this.#failed = false;
      return;
    } catch (e) {
      error = e;
    }
    // A kernel that refuses the bridge-device chain (no netdev family, or an older one that
    // cannot hook a device that is not there) still gets the port rules.
    try {
      await this.#run(guardScript(entries, this.#table, ports, { device: false }));
      this.#applied = script;
      if (!this.#failed) {
        log.warn(
          "proxy: bridge guard without its bridge-device chain: a port that started since the last listing could reach the host with tagged frames",
          { error: String((error as Error)?.message ?? error) },
        );
      }
      this.#failed = true;
      return;
    } catch { /* the error that counts is the first one */ }
    this.#applied = undefined;
    if (!this.#failed) {
      log.warn(
        "proxy: bridge guard off: instances without filters could forge a pinned instance's address (run the proxy with CAP_NET_ADMIN)",
        { error: String((error as Error)?.message ?? error) },
      );
    }
    this.#failed = true;
  }

  /** Removes the tables. */
  async close(): Promise<void> {
    if (this.#applied === undefined) return;
    this.#applied = undefined;
    await this.#run(guardRemoveScript(this.#table)).catch(() =>
      this.#run(guardRemoveScript(this.#table, { device: false })).catch(() => {})
    );
  }
}
