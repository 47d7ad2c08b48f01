/**
 * Where an egress bridge's address comes from, and the one Incus race its setup needs to
 * survive. Split from `egress.ts`, which uses both.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import type { IncusClient } from "../../incus/mod.ts";
import type { EgressPlan } from "./names.ts";

/**
 * A fixed `/24` for the bridge out of `pool` (`A.B.0.0/16`), chosen from the bridge's name
 * and skipping subnets other Incus networks use: `A.B.N.1/24`. Used instead of `auto` when
 * the server's environment sets `ISB_EGRESS_SUBNETS`, because `auto` makes incusd probe
 * random 10.x addresses (pings through the default route) to find a free one.
 */
export function pickSubnet(pool: string, bridge: string, used: readonly string[]): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.0\.0\/16$/.exec(pool.trim());
  if (!m) throw new IsbError("invalid", `ISB_EGRESS_SUBNETS "${pool}": expected A.B.0.0/16`);
  const prefix = `${m[1]}.${m[2]}.`;
  const taken = new Set(
    used.filter((a) => a.startsWith(prefix)).map((a) =>
      Number(a.slice(prefix.length).split(".")[0])
    ),
  );
  const start = parseInt(bridge.slice(-8, -6) || "0", 16) % 254;
  for (let i = 0; i < 254; i++) {
    const n = 1 + (start + i) % 254;
    if (!taken.has(n)) return `${prefix}${n}.1/24`;
  }
  throw new IsbError("invalid", `ISB_EGRESS_SUBNETS "${pool}": no free /24 left`);
}

/** The address a new bridge gets: `auto`, or a /24 from the pool. */
export async function bridgeAddress(h: IncusClient, plan: EgressPlan, pool: string | undefined) {
  if (!pool) return "auto";
  const used = (await h.listNetworks()).map((n) => n.config?.["ipv4.address"] ?? "");
  return pickSubnet(pool, plan.network, used);
}

export { retryLinkRace } from "../../link_race.ts";
