/**
 * Connecting where a guest asked, only where the guard allows: the I/O edge of
 * proxy/egress/guard.ts. The host is parsed once (proxy/egress/address.ts), a name resolved
 * once, every answer checked as bytes, and the connection made to those bytes (never to the name, which would be looked up again:
 * no DNS rebinding between the check and the connect). Also reads what the forward proxy's
 * rules need from the host: its own addresses and the subnets of its interfaces (every
 * Incus bridge, the proxy-only bridge, isb egress bridges and the LAN are interfaces here),
 * re-read every couple of seconds so a bridge made after the start is refused too.
 *
 * @module
 */

import { IsbError, log } from "../../rpc/base.ts";
import { type Cidr, type Guard, guardedAddresses, parseCidr, type Resolver } from "./guard.ts";
import { formatAddress, parseIp } from "./address.ts";

/** The host's own addresses and the subnets of its interfaces. */
export interface HostNets {
  /** Every interface address, normalised. */
  own: Set<string>;
  /** Every interface's subnet. */
  subnets: Cidr[];
}

let warned = false;

/** Reads {@link HostNets} from the host's interfaces (empty, with one warning, if denied). */
export function readHostNets(): HostNets {
  const own = new Set<string>();
  const subnets: Cidr[] = [];
  let list: Deno.NetworkInterfaceInfo[] = [];
  try {
    list = Deno.networkInterfaces();
  } catch (e) {
    if (!warned) {
      warned = true;
      log.warn("proxy: cannot read the host's interfaces; only special addresses are refused", {
        error: String((e as Error)?.message ?? e),
      });
    }
  }
  for (const i of list) {
    const ip = parseIp(i.address.toLowerCase().replace(/%.*$/, ""));
    if (ip) own.add(ip.text);
    const c = parseCidr(i.cidr.replace(/%[^/]*/, ""));
    if (c) subnets.push(c);
  }
  return { own, subnets };
}

/** {@link readHostNets}, read again at most every `ttlMs`. */
export function cachedHostNets(
  ttlMs = 2000,
  read: () => HostNets = readHostNets,
  now: () => number = Date.now,
): () => HostNets {
  let at = -Infinity;
  let cur: HostNets = { own: new Set(), subnets: [] };
  return () => {
    if (now() - at >= ttlMs) {
      cur = read();
      at = now();
    }
    return cur;
  };
}

/** Connects to `host:port` at an address the guard allows; `forbidden` or `io` otherwise. */
export async function dialGuarded(
  host: string,
  port: number,
  guard: Guard,
  opts: { timeoutMs?: number } = {},
): Promise<Deno.TcpConn> {
  const addresses = await guardedAddresses(host, guard);
  let last: unknown;
  for (const address of addresses) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), opts.timeoutMs ?? 10_000);
    try {
      // The checked bytes, written canonically: never the text the guest sent.
      const hostname = formatAddress(address.bytes);
      return await Deno.connect({ hostname, port, signal: ac.signal, autoSelectFamily: false });
    } catch (e) {
      last = e;
    } finally {
      clearTimeout(timer);
    }
  }
  throw new IsbError(
    "io",
    `connect "${host}:${port}": ${String((last as Error)?.message ?? last)}`,
    { cause: last },
  );
}

/** The system's resolver (A and AAAA records). */
export function systemResolver(): Resolver {
  return async (hostname) => {
    const [a, aaaa] = await Promise.all([
      Deno.resolveDns(hostname, "A").catch(() => [] as string[]),
      Deno.resolveDns(hostname, "AAAA").catch(() => [] as string[]),
    ]);
    return [...a, ...aaaa];
  };
}
