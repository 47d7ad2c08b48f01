/**
 * The bridge guard: host-side nftables rules that keep every other bridge port from sending
 * as a running instance with a configured address. `isx branch` pins its instances' NICs
 * (fixed address plus Incus's `security.*_filtering`), which stops *them* from forging
 * anyone; but an instance isx did not make (a plain `incus launch`, an isb sandbox) has no
 * filters, and as root it could take a pinned instance's address and MAC, answer ARP for
 * it, and call the proxy as that instance. So for each running instance whose NIC
 * configuration names an address, frames entering the bridge from any other port with its
 * MAC as source, IP packets with its address as source, and ARP claiming its address are
 * dropped.
 *
 * One table (`bridge isx_guard`), one `prerouting` chain, stateless rules only (no
 * `ct state`, so kernels without bridge conntrack load it: the same reason isx's ACLs sit on
 * bridges, docs/decisions.md). It is replaced whole and atomically (one `nft -f` transaction)
 * whenever the registry's listing changes it, before that listing names any caller, and
 * removed when the proxy stops (stale rules would block a later owner of an address).
 * Writing it needs CAP_NET_ADMIN: a proxy without it logs that the guard is off.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";

/** The guard's nftables table (family `bridge`). */
export const GUARD_TABLE = "isx_guard";

/** One running NIC to guard: its host-side port, its MAC and its configured addresses. */
export interface GuardEntry {
  /** The host side of the NIC (`volatile.<nic>.host_name`). */
  port: string;
  /** Its MAC (`volatile.<nic>.hwaddr`). */
  mac: string;
  /** The addresses its configuration names. */
  addresses: string[];
}

const PORT_RE = /^[A-Za-z0-9_.-]{1,15}$/;
const MAC_RE = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;
const V4_RE = /^\d{1,3}(\.\d{1,3}){3}$/;
const V6_RE = /^[0-9a-f:]+$/;

/**
 * The whole table as one `nft -f` script: created if missing, deleted, written anew (so the
 * swap is one transaction). Values that do not look like a port, MAC or address are left
 * out, so nothing from Incus reaches nft unchecked. Pure.
 */
export function guardScript(entries: readonly GuardEntry[], table = GUARD_TABLE): string {
  const rules: string[] = [];
  for (const e of entries) {
    const mac = e.mac.toLowerCase();
    if (!PORT_RE.test(e.port) || !MAC_RE.test(mac)) continue;
    const other = `iifname != "${e.port}"`;
    rules.push(`${other} ether saddr ${mac} drop`);
    for (const a of e.addresses.map((x) => x.toLowerCase())) {
      if (V4_RE.test(a)) {
        rules.push(`${other} ip saddr ${a} drop`, `${other} arp saddr ip ${a} drop`);
      } else if (V6_RE.test(a) && a.includes(":")) {
        rules.push(`${other} ip6 saddr ${a} drop`);
      }
    }
  }
  return [
    `table bridge ${table}`,
    `delete table bridge ${table}`,
    `table bridge ${table} {`,
    `\tchain pre {`,
    `\t\ttype filter hook prerouting priority -300; policy accept;`,
    ...rules.map((r) => `\t\t${r}`),
    `\t}`,
    `}`,
    "",
  ].join("\n");
}

/** The script that removes the table (if present). */
export function guardRemoveScript(table = GUARD_TABLE): string {
  return `table bridge ${table}\ndelete table bridge ${table}\n`;
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

  /** Writes the table for `entries` if it differs from the last one written. */
  async sync(entries: readonly GuardEntry[]): Promise<void> {
    const script = guardScript(entries, this.#table);
    if (script === this.#applied) return;
    try {
      await this.#run(script);
      this.#applied = script;
      if (this.#failed) log.info("proxy: bridge guard installed");
      this.#failed = false;
    } catch (e) {
      this.#applied = undefined;
      if (!this.#failed) {
        log.warn(
          "proxy: bridge guard off: instances without filters could forge a pinned instance's address (run the proxy with CAP_NET_ADMIN)",
          { error: String((e as Error)?.message ?? e) },
        );
      }
      this.#failed = true;
    }
  }

  /** Removes the table. */
  async close(): Promise<void> {
    if (this.#applied === undefined) return;
    this.#applied = undefined;
    await this.#run(guardRemoveScript(this.#table)).catch(() => {});
  }
}
