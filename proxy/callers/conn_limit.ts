/**
 * A kernel limit on open TCP connections per source address to the proxy's guest-facing
 * ports. The proxy's own per-instance cap (limits.ts) counts the connections JavaScript
 * holds; a TLS connection that never sends its ClientHello is "closed" by the header timeout
 * as far as JavaScript can, but Deno's handshake task keeps the socket until the guest
 * closes it, so such sockets escape that cap. Conntrack counts them all: one `inet` table
 * whose input chain rejects a new connection from an address that already has `perSource`
 * open to one of the ports. Host-terminated traffic is tracked on every kernel (unlike
 * bridge conntrack, which the bridge guard avoids), so this table holds where the guard does.
 *
 * Written when the proxy starts (retried with backoff until it holds, proxy/host/_converge.ts;
 * `isx proxy status` is not `running` before), removed when it stops.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import type { NftRunner } from "./guard.ts";

/** The limit's nftables table (family `inet`). */
export const CONN_LIMIT_TABLE = "isx_connlimit";

/** The ports to limit and the number of open connections each source address may hold. */
export interface ConnLimitSpec {
  /** TCP ports the proxy serves to guests (TLS, forward, extra listens). */
  ports: readonly number[];
  /** Open connections per source address before new ones are refused (TCP reset). */
  perSource: number;
  /** Only connections arriving on these interfaces (the bridges guests are on); default all. */
  interfaces?: readonly string[];
}

const IFACE_RE = /^[A-Za-z0-9_.-]{1,15}$/;

/** The whole table as one `nft -f` script, replacing any earlier one atomically. Pure. */
export function connLimitScript(spec: ConnLimitSpec, table = CONN_LIMIT_TABLE): string {
  const ports = [...new Set(spec.ports)].filter((p) => Number.isInteger(p) && p > 0 && p < 65536);
  if (!ports.length) throw new RangeError("connection limit: no port to limit");
  if (!Number.isInteger(spec.perSource) || spec.perSource < 1) {
    throw new RangeError(`connection limit: perSource ${spec.perSource} is not a positive integer`);
  }
  const ifaces = [...new Set(spec.interfaces ?? [])];
  const bad = ifaces.find((i) => !IFACE_RE.test(i));
  if (bad !== undefined) throw new RangeError(`connection limit: interface "${bad}"`);
  const iif = ifaces.length ? `iifname { ${ifaces.map((i) => `"${i}"`).join(", ")} } ` : "";
  const dport = `${iif}tcp dport { ${ports.sort((a, b) => a - b).join(", ")} } ct state new`;
  return [
    `table inet ${table}`,
    `delete table inet ${table}`,
    `table inet ${table} {`,
    `\tset src4 { type ipv4_addr; flags dynamic; }`,
    `\tset src6 { type ipv6_addr; flags dynamic; }`,
    `\tchain input {`,
    `\t\ttype filter hook input priority -10; policy accept;`,
    `\t\t${dport} add @src4 { ip saddr ct count over ${spec.perSource} } reject with tcp reset`,
    `\t\t${dport} add @src6 { ip6 saddr ct count over ${spec.perSource} } reject with tcp reset`,
    `\t}`,
    `}`,
    "",
  ].join("\n");
}

/** The script that removes the table (if present). */
export function connLimitRemoveScript(table = CONN_LIMIT_TABLE): string {
  return `table inet ${table}\ndelete table inet ${table}\n`;
}

/** The limit as a need of the proxy: `apply` writes it (throws on failure), `remove` undoes it. */
export interface ConnLimitTable {
  /** Writes the table (replacing any earlier one); throws with nft's message. */
  apply(): Promise<void>;
  /** Removes the table if this proxy ever wrote it (never throws). */
  remove(): Promise<void>;
}

/** The limit for `spec` in table `table` (nothing is written until `apply`). */
export function connLimitTable(
  run: NftRunner,
  spec: ConnLimitSpec,
  table = CONN_LIMIT_TABLE,
): ConnLimitTable {
  if (!/^[a-z][a-z0-9_]{0,30}$/.test(table)) throw new TypeError(`limit table "${table}"`);
  const script = connLimitScript(spec, table);
  let written = false;
  return {
    async apply() {
      await run(script);
      written = true;
    },
    async remove() {
      if (!written) return;
      written = false;
      await run(connLimitRemoveScript(table)).catch(() => {});
    },
  };
}

/** Installs the limit once; resolves to a function that removes it (a no-op if it never held). */
export async function installConnLimit(
  run: NftRunner,
  spec: ConnLimitSpec,
  table = CONN_LIMIT_TABLE,
): Promise<() => Promise<void>> {
  const limit = connLimitTable(run, spec, table);
  try {
    await limit.apply();
  } catch (e) {
    log.warn(
      "proxy: kernel connection limit off: a guest can hold sockets the proxy has dropped (run the proxy with CAP_NET_ADMIN)",
      { error: String((e as Error)?.message ?? e) },
    );
  }
  return () => limit.remove();
}
