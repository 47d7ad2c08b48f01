/**
 * The DNS-rebinding defence of isb egress: an allowed host *name* may only lead to a public
 * address. The relay resolves the name itself, keeps the public addresses, and connects to
 * one of them (TLS still names and verifies the host), so a name that resolves, or is made
 * to resolve, to a loopback, private, link-local or otherwise special address never
 * reaches the host's or the bridge's own services. A host that is literally an IP address
 * passed the allow-list as that address and is used as it is. The resolver comes in (tests
 * give a fake one; the system's is in proxy/egress/dial.ts); this module is pure.
 *
 * The forward proxy (port 3128) uses the same checks with more rules ({@link targetAllowed}):
 * besides special addresses, the host's own addresses and every subnet of its interfaces
 * (the Incus bridges, the LAN), and IP literals are checked too.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

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
    (a === 192 && b === 88 && c === 99) || // 6to4 relay anycast
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
    if (p.some((x) => x > 255)) return undefined;
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

function dotted(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * The IPv4 address an IPv6 form carries and leads to: IPv4-mapped and -compatible
 * (`::ffff:a.b.c.d`, `::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
 */
export function embeddedV4(ip: string): string | undefined {
  if (V4.test(ip)) return undefined;
  const g = v6Groups(ip);
  if (!g) return undefined;
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    return dotted(g[6]!, g[7]!);
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    return dotted(g[6]!, g[7]!);
  }
  if (g[0] === 0x2002) return dotted(g[1]!, g[2]!);
  return undefined;
}

/** True for a public unicast address (IPv4 or IPv6); false for special ones and non-addresses. */
export function isPublicAddress(ip: string): boolean {
  if (V4.test(ip)) return v4Public(ip);
  const g = v6Groups(ip);
  if (!g) return false;
  // IPv4-mapped, -compatible, NAT64 and 6to4 addresses are as public as the IPv4 inside.
  const inside = embeddedV4(ip);
  if (inside !== undefined) return v4Public(inside);
  const [first, second] = [g[0]!, g[1]!];
  // Only global unicast (2000::/3) is public: this leaves out ::, ::1, ULA (fc00::/7),
  // link- and site-local, multicast, the discard prefix 100::/64 and other reserved space.
  if ((first & 0xe000) !== 0x2000) return false;
  return !(
    (first === 0x2001 && second < 0x0200) || // IETF protocol assignments (Teredo, ORCHID…)
    (first === 0x2001 && second === 0x0db8) || // documentation
    (first === 0x3fff && second < 0x1000) // documentation (3fff::/20)
  );
}

/** An address range: 16 address bytes (IPv4 as `::ffff:a.b.c.d`) and a prefix length. */
export interface Cidr {
  /** The network's bytes. */
  bytes: Uint8Array;
  /** The prefix length over 128 bits. */
  prefix: number;
}

/** The 16 bytes of an address (IPv4 mapped into `::ffff:0:0/96`), or undefined. */
export function addressBytes(ip: string): Uint8Array | undefined {
  const m = V4.exec(ip);
  const g = m ? [0, 0, 0, 0, 0, 0xffff, 0, 0] : v6Groups(ip);
  if (!g) return undefined;
  if (m) {
    const p = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
    if (p.some((x) => x > 255)) return undefined;
    g[6] = (p[0]! << 8) | p[1]!;
    g[7] = (p[2]! << 8) | p[3]!;
  }
  const out = new Uint8Array(16);
  g.forEach((x, i) => {
    out[2 * i] = x >> 8;
    out[2 * i + 1] = x & 255;
  });
  return out;
}

/** Parses `10.77.0.1/24` or `fd42::1/64` (a bare address is a /32 or /128). */
export function parseCidr(text: string): Cidr | undefined {
  const [addr = "", len] = text.trim().split("/");
  const bytes = addressBytes(addr);
  if (!bytes) return undefined;
  const v4 = V4.test(addr);
  const max = v4 ? 32 : 128;
  const n = len === undefined ? max : Number(len);
  if (!Number.isInteger(n) || n < 0 || n > max || (len !== undefined && !/^\d+$/.test(len))) {
    return undefined;
  }
  return { bytes, prefix: v4 ? n + 96 : n };
}

/** True when `ip` lies in `cidr`. */
export function inCidr(ip: string, cidr: Cidr): boolean {
  const b = addressBytes(ip);
  if (!b) return false;
  let bits = cidr.prefix;
  for (let i = 0; i < 16 && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((b[i]! & mask) !== (cidr.bytes[i]! & mask)) return false;
  }
  return true;
}

/** What a forward-proxy target may not be, besides a special address. */
export interface TargetRules {
  /** The host's own addresses (every interface, every listen address), normalised. */
  own: ReadonlySet<string>;
  /** Subnets never reached: every subnet of the host's interfaces (Incus bridges, LAN…). */
  subnets: readonly Cidr[];
  /** Test only: loopback targets are allowed (the fake upstreams live there). */
  allowLoopback?: boolean;
}

function loopbackAddress(ip: string): boolean {
  return /^127\./.test(ip) || ip === "::1" || /^::ffff:127\./i.test(ip);
}

/**
 * True when a guest may be connected to `ip` (resolved already): a public unicast address
 * that is none of the host's own and in none of its subnets, checked for the address and
 * for the IPv4 address an IPv6 form embeds.
 */
export function targetAllowed(ip: string, rules: TargetRules): boolean {
  const a = ip.toLowerCase().replace(/^\[|\]$/g, "");
  if (rules.allowLoopback && loopbackAddress(a)) return true;
  if (!isPublicAddress(a)) return false;
  const inside = embeddedV4(a);
  for (const form of inside === undefined ? [a] : [a, inside]) {
    if (rules.own.has(form)) return false;
    if (rules.subnets.some((c) => inCidr(form, c))) return false;
  }
  return true;
}

/** True when `host` is an IP address literal. */
export function isIpLiteral(host: string): boolean {
  return V4.test(host) || v6Groups(host) !== undefined && host.includes(":");
}

/** Which addresses a host name may lead to, and how names are looked up. */
export interface Guard {
  /** Looks up a host name (A and AAAA). */
  resolve: Resolver;
  /** True when a connection to this (resolved) address is allowed. */
  allows(ip: string): boolean;
  /** An IP literal is used as it is, unchecked (isb egress: the allow-list named it). */
  literalsAsIs?: boolean;
}

/**
 * The addresses to connect to for `hostname`, in the resolver's order: every answer the
 * guard allows (an IP literal is its own answer). None allowed is `forbidden`, a failed
 * lookup `io`; the caller connects only to what this returns (no second lookup).
 */
export async function guardedAddresses(hostname: string, guard: Guard): Promise<string[]> {
  if (isIpLiteral(hostname)) {
    const ip = hostname.replace(/^\[|\]$/g, "");
    if (guard.literalsAsIs || guard.allows(ip)) return [ip];
    throw new IsbError("forbidden", `connect upstream "${hostname}": not a public address`);
  }
  let found: string[];
  try {
    found = await guard.resolve(hostname);
  } catch (e) {
    throw new IsbError(
      "io",
      `resolve "${hostname}": ${String((e as Error)?.message ?? e)}`,
      { cause: e },
    );
  }
  const ok = found.filter((ip) => guard.allows(ip));
  if (ok.length) return ok;
  throw new IsbError(
    "forbidden",
    `connect upstream "${hostname}": it resolves to no public address (${
      found.join(", ") || "none"
    })`,
  );
}

/**
 * The isb egress guard: public addresses only, and with `nets` none of the host's own nor in
 * its subnets; an IP literal as the allow-list named it.
 */
export function publicGuard(
  resolve: Resolver,
  nets?: () => { own: ReadonlySet<string>; subnets: readonly Cidr[] },
): Guard {
  const allows = nets ? (ip: string) => targetAllowed(ip, nets()) : isPublicAddress;
  return { resolve, allows, literalsAsIs: true };
}

/** The address to connect to for `hostname`: itself if an IP literal, else a public one. */
export async function egressAddress(hostname: string, resolve: Resolver): Promise<string> {
  return (await guardedAddresses(hostname, publicGuard(resolve)))[0]!;
}
