/**
 * When to look for a booting guest's address: the bridge's dnsmasq lease file, read on the
 * host, says the moment the guest was given its lease, so the wait for its IPv4 address
 * ({@link waitForIpv4}) asks Incus for the instance's state only then (and rarely before).
 *
 * Why: a state GET makes incusd fork into the container's network namespace. Measured here
 * (2 cores), it costs ~10 ms of CPU more than a plain GET; polled every 25 ms through a boot,
 * that took a third of a core from the guest it waited for. Waiting on the lease file, a
 * pinned copy's start → IPv4 went from 553 to 400 ms (12 alternating rounds, medians, 8 state
 * GETs against 1; docs/decisions.md).
 *
 * The file is only a hint: the state GET stays the authority on the address, so a line read
 * half-written, a stale lease or a guest that never asks dnsmasq changes when the state is
 * read, never what the wait returns. Where the file cannot be read (a remote Incus, another
 * layout, no read grant), there is no watch and the wait polls the state as before.
 *
 * @module
 */

/** What a watch knows: not yet, the guest's lease is there, or nothing (the file is unusable). */
export type LeaseState = "waiting" | "leased" | "off";

/** A watch on one bridge's lease file for one instance's lease. */
export interface LeaseWatch {
  /**
   * Whether a lease for the instance (its name or its address) appeared since the watch began,
   * reading the file again while not; once leased or off, it stays so.
   */
  state(): LeaseState;
}

/**
 * The largest lease file read (~800 leases). Any container on the bridge can make dnsmasq add
 * leases (DHCP requests from made-up MACs); past this the watch stops reading, so a flood
 * cannot make each 5 ms read cost more than a few tens of µs.
 */
export const MAX_LEASE_FILE = 64 * 1024;

/**
 * The lease file of managed network `network` of the incusd behind `where` (the client's
 * socket path; a URL has none): `<incus dir>/networks/<network>/dnsmasq.leases`.
 */
export function leaseFile(where: string, network: string): string | undefined {
  if (!where.startsWith("/") || !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(network)) return undefined;
  const dir = where.replace(/\/[^/]*$/, "") || "/";
  return `${dir}/networks/${network}/dnsmasq.leases`;
}

function readLines(file: string): string[] | undefined {
  try {
    if (Deno.statSync(file).size > MAX_LEASE_FILE) return undefined;
    return Deno.readTextFileSync(file).split("\n");
  } catch {
    // missing, another layout, or not granted (Deno's NotCapable): no watch
    return undefined;
  }
}

/**
 * Begins a watch, before the instance starts: the lines already there (an older lease of the
 * address, or of another instance of that name) are not its lease. A dnsmasq lease line is
 * `<expiry> <mac> <address> <hostname> <client id>`. Undefined when the file cannot be read.
 */
export function watchLease(
  file: string | undefined,
  lease: { name: string; address?: string },
): LeaseWatch | undefined {
  if (file === undefined) return undefined;
  const before = readLines(file);
  if (before === undefined) return undefined;
  const old = new Set(before);
  let known: LeaseState = "waiting";
  return {
    state() {
      if (known !== "waiting") return known;
      const lines = readLines(file);
      if (lines === undefined) return (known = "off");
      for (const line of lines) {
        if (old.has(line)) continue;
        const f = line.split(" ");
        if (f[3] === lease.name || (lease.address !== undefined && f[2] === lease.address)) {
          return (known = "leased");
        }
      }
      return known;
    },
  };
}
