/**
 * The DNS-rebinding defence of isb egress: an allowed host *name* may only lead to a public
 * address. The relay resolves the name itself, keeps the public addresses, and connects to
 * one of them (TLS still names and verifies the host), so a name that resolves, or is made
 * to resolve, to a loopback, private, link-local or otherwise special address never
 * reaches the host's or the bridge's own services. A host that is literally an IP address
 * passed the allow-list as that address and is used as it is. The resolver comes in (tests
 * give a fake one; the system's is in proxy/egress/dial.ts); this module is pure.
 *
 * Every check is on bytes: the host is parsed once (proxy/egress/address.ts), a form that is
 * neither a canonical literal nor a plain name is refused, and the addresses returned are the
 * bytes to dial, so what is checked is what is connected to.
 *
 * The forward proxy (port 3128) uses the same checks with more rules ({@link targetAllowed}):
 * besides special addresses, the host's own addresses and every subnet of its interfaces
 * (the Incus bridges, the LAN), and IP literals are checked too.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";
import { formatAddress, type IpAddress, parseHost, parseIp } from "./address.ts";

/** Looks up a host name's addresses (A and AAAA). */
export type Resolver = (hostname: string) => Promise<string[]>;

function v4Public(b: Uint8Array): boolean {
  const [a, bb, c] = [b[0]!, b[1]!, b[2]!];
  return !(
    a === 0 || a === 10 || a === 127 || a >= 224 ||
    (a === 100 && bb >= 64 && bb < 128) || // carrier-grade NAT
    (a === 169 && bb === 254) || // link-local
    (a === 172 && bb >= 16 && bb < 32) ||
    (a === 192 && bb === 168) ||
    (a === 192 && bb === 0 && (c === 0 || c === 2)) || // IETF, TEST-NET-1
    (a === 192 && bb === 88 && c === 99) || // 6to4 relay anycast
    (a === 198 && (bb === 18 || bb === 19)) || // benchmarking
    (a === 198 && bb === 51 && c === 100) || (a === 203 && bb === 0 && c === 113)
  );
}

function asIp(ip: string | IpAddress): IpAddress | undefined {
  return typeof ip === "string" ? parseIp(ip.toLowerCase()) : ip;
}

function v4Of(b: Uint8Array): IpAddress {
  const bytes = b.slice();
  return { family: 4, bytes, text: formatAddress(bytes) };
}

/** The IPv4 address IPv6 bytes carry and lead to, or undefined. */
function embeddedV4Of(ip: IpAddress): IpAddress | undefined {
  if (ip.family !== 6) return undefined;
  const b = ip.bytes;
  const zero = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zero(0, 10) && ((b[10] === 0xff && b[11] === 0xff) || (b[10] === 0 && b[11] === 0))) {
    return v4Of(b.subarray(12)); // mapped, compatible
  }
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) {
    return v4Of(b.subarray(12)); // SIIT-translated
  }
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zero(4, 12)) {
    return v4Of(b.subarray(12)); // NAT64
  }
  if (b[0] === 0x20 && b[1] === 0x02) return v4Of(b.subarray(2, 6)); // 6to4
  return undefined;
}

/**
 * The IPv4 address an IPv6 form carries and leads to: IPv4-mapped and -compatible
 * (`::ffff:a.b.c.d`, `::a.b.c.d`), SIIT, NAT64 (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`).
 */
export function embeddedV4(ip: string | IpAddress): string | undefined {
  const a = asIp(ip);
  return a ? embeddedV4Of(a)?.text : undefined;
}

/** True for a public unicast address (IPv4 or IPv6); false for special ones and non-addresses. */
export function isPublicAddress(ip: string | IpAddress): boolean {
  const a = asIp(ip);
  if (!a) return false;
  if (a.family === 4) return v4Public(a.bytes);
  // IPv4-mapped, -compatible, NAT64 and 6to4 addresses are as public as the IPv4 inside.
  const inside = embeddedV4Of(a);
  if (inside !== undefined) return v4Public(inside.bytes);
  const [first, second] = [(a.bytes[0]! << 8) | a.bytes[1]!, (a.bytes[2]! << 8) | a.bytes[3]!];
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
export function addressBytes(ip: string | IpAddress): Uint8Array | undefined {
  const a = asIp(ip);
  if (!a || a.family === 6) return a?.bytes;
  const out = new Uint8Array(16);
  out[10] = out[11] = 0xff;
  out.set(a.bytes, 12);
  return out;
}

/** Parses `10.77.0.1/24` or `fd42::1/64` (a bare address is a /32 or /128). */
export function parseCidr(text: string): Cidr | undefined {
  const [addr = "", len] = text.trim().split("/");
  const ip = asIp(addr);
  const bytes = addressBytes(addr);
  if (!ip || !bytes) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  const n = len === undefined ? max : Number(len);
  if (!Number.isInteger(n) || n < 0 || n > max || (len !== undefined && !/^\d+$/.test(len))) {
    return undefined;
  }
  return { bytes, prefix: ip.family === 4 ? n + 96 : n };
}

/** True when `ip` lies in `cidr`. */
export function inCidr(ip: string | IpAddress, cidr: Cidr): boolean {
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
  /** The host's own addresses (every interface, every listen address), in any literal form. */
  own: ReadonlySet<string>;
  /** Subnets never reached: every subnet of the host's interfaces (Incus bridges, LAN…). */
  subnets: readonly Cidr[];
  /** Test only: loopback targets are allowed (the fake upstreams live there). */
  allowLoopback?: boolean;
}

function loopbackAddress(ip: IpAddress): boolean {
  if (ip.family === 4) return ip.bytes[0] === 127;
  return ip.text === "::1" || (embeddedV4Of(ip)?.bytes[0] === 127 && ip.bytes[10] === 0xff);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * True when a guest may be connected to `ip` (resolved already): a public unicast address
 * that is none of the host's own and in none of its subnets, checked for the address and
 * for the IPv4 address an IPv6 form embeds. Compared as bytes.
 */
export function targetAllowed(ip: string | IpAddress, rules: TargetRules): boolean {
  const a = asIp(ip);
  if (!a) return false;
  if (rules.allowLoopback && loopbackAddress(a)) return true;
  if (!isPublicAddress(a)) return false;
  const inside = embeddedV4Of(a);
  const own = [...rules.own].flatMap((o) => asIp(o.replace(/%.*$/, "")) ?? []);
  for (const form of inside === undefined ? [a] : [a, inside]) {
    if (own.some((o) => sameBytes(o.bytes, form.bytes))) return false;
    if (rules.subnets.some((c) => inCidr(form, c))) return false;
  }
  return true;
}

/** True when `host` is an IP address literal in an accepted form ({@link parseHost}). */
export function isIpLiteral(host: string): boolean {
  return parseHost(host)?.kind === "ip";
}

/** Which addresses a host name may lead to, and how names are looked up. */
export interface Guard {
  /** Looks up a host name (A and AAAA). */
  resolve: Resolver;
  /** True when a connection to this (resolved) address is allowed. */
  allows(ip: IpAddress): boolean;
  /** An IP literal is used as it is, unchecked (isb egress: the allow-list named it). */
  literalsAsIs?: boolean;
}

/**
 * The addresses to connect to for `hostname`, in the resolver's order: every answer the
 * guard allows (an IP literal is its own answer), as bytes. The host is parsed once
 * ({@link parseHost}): a form that is neither a canonical literal nor a plain name is
 * `forbidden`, never looked up or dialled. None allowed is `forbidden`, a failed lookup
 * `io`; the caller connects only to what this returns (no second lookup, and never to the
 * original text).
 */
export async function guardedAddresses(hostname: string, guard: Guard): Promise<IpAddress[]> {
  const parsed = parseHost(hostname);
  if (!parsed) {
    throw new IsbError(
      "forbidden",
      `connect upstream "${hostname}": not a canonical address or a plain host name`,
    );
  }
  if (parsed.kind === "ip") {
    if (guard.literalsAsIs || guard.allows(parsed.ip)) return [parsed.ip];
    throw new IsbError("forbidden", `connect upstream "${hostname}": not a public address`);
  }
  let found: string[];
  try {
    found = await guard.resolve(parsed.name);
  } catch (e) {
    throw new IsbError(
      "io",
      `resolve "${hostname}": ${String((e as Error)?.message ?? e)}`,
      { cause: e },
    );
  }
  const ok = found.flatMap((t) => {
    const ip = parseIp(t.toLowerCase());
    return ip && guard.allows(ip) ? [ip] : [];
  });
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
  const allows = nets
    ? (ip: IpAddress) => targetAllowed(ip, nets())
    : (ip: IpAddress) => isPublicAddress(ip);
  return { resolve, allows, literalsAsIs: true };
}

/** The address to connect to for `hostname`: itself if an IP literal, else a public one. */
export async function egressAddress(hostname: string, resolve: Resolver): Promise<string> {
  return (await guardedAddresses(hostname, publicGuard(resolve)))[0]!.text;
}
