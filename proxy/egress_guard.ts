/**
 * The DNS-rebinding defence of isb egress: an allowed host *name* may only lead to a public
 * address. The relay resolves the name itself, keeps the public addresses, and connects to
 * one of them (TLS still names and verifies the host), so a name that resolves, or is made
 * to resolve, to a loopback, private, link-local or otherwise special address never
 * reaches the host's or the bridge's own services. A host that is literally an IP address
 * passed the allow-list as that address and is used as it is. The resolver comes in (tests
 * give a fake one); the checks are pure.
 *
 * @module
 */

import { IsbError } from "../rpc/mod.ts";

/** Looks up a host name's addresses (A and AAAA). */
export type Resolver = (hostname: string) => Promise<string[]>;

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function v4Public(ip: string): boolean {
  const m = V4.exec(ip);
  if (!m) return false;
  const [a, b, c] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if ([a, b, c, Number(m[4])].some((x) => x > 255)) return false;
  return !(
    a === 0 || a === 10 || a === 127 || a >= 224 ||
    (a === 100 && b >= 64 && b < 128) || // carrier-grade NAT
    (a === 169 && b === 254) || // link-local
    (a === 172 && b >= 16 && b < 32) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && (c === 0 || c === 2)) || // IETF, TEST-NET-1
    (a === 198 && (b === 18 || b === 19)) || // benchmarking
    (a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)
  );
}

/** The 8 groups of an IPv6 address, or undefined. */
function v6Groups(ip: string): number[] | undefined {
  let s = ip.toLowerCase().replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const v4 = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(s);
  if (v4) {
    const p = v4[1]!.split(".").map(Number);
    s = s.slice(0, -v4[1]!.length) +
      `${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const parse = (h: string) => (h === "" ? [] : h.split(":").map((g) => parseInt(g, 16)));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  const all = [...head, ...Array(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return all.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? all : undefined;
}

/** True for a public unicast address (IPv4 or IPv6); false for special ones and non-addresses. */
export function isPublicAddress(ip: string): boolean {
  if (V4.test(ip)) return v4Public(ip);
  const g = v6Groups(ip);
  if (!g) return false;
  const embedded = () => `${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  // IPv4-mapped, -compatible and NAT64 addresses are as public as the IPv4 inside.
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    return v4Public(embedded());
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    return v4Public(embedded());
  }
  const first = g[0]!;
  return !(
    (first & 0xfe00) === 0xfc00 || // unique local
    (first & 0xffc0) === 0xfe80 || // link-local
    (first & 0xffc0) === 0xfec0 || // site-local
    (first & 0xff00) === 0xff00 || // multicast
    (first === 0x2001 && g[1] === 0x0db8) // documentation
  );
}

/** True when `host` is an IP address literal. */
export function isIpLiteral(host: string): boolean {
  return V4.test(host) || v6Groups(host) !== undefined && host.includes(":");
}

/** The address to connect to for `hostname`: itself if an IP literal, else a public one. */
export async function egressAddress(hostname: string, resolve: Resolver): Promise<string> {
  if (isIpLiteral(hostname)) return hostname.replace(/^\[|\]$/g, "");
  let found: string[];
  try {
    found = await resolve(hostname);
  } catch (e) {
    throw new IsbError(
      "io",
      `resolve "${hostname}": ${String((e as Error)?.message ?? e)}`,
      { cause: e },
    );
  }
  const ok = found.find(isPublicAddress);
  if (ok) return ok;
  throw new IsbError(
    "forbidden",
    `connect upstream "${hostname}": it resolves to no public address (${
      found.join(", ") || "none"
    })`,
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
