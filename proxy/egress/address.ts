/**
 * The one parse of a host a guest names (a forward-proxy target, a `CONNECT` authority, an
 * egress `Host`): the text becomes bytes once, the bytes are what the guard checks, and the
 * bytes (written back out in canonical form by {@link formatAddress}) are what is dialled.
 * The original text never reaches `Deno.connect`, whose resolver (glibc's `getaddrinfo`,
 * which calls `inet_aton`) reads `012.0.0.1` as octal, `0x7f.1` and `127.1` as 127.0.0.1 and
 * `2130706433` as a 32-bit integer, and takes `%zone` suffixes: any form two parsers read
 * differently lets a guard approve one address while another is dialled.
 *
 * So only two literal forms are addresses: canonical dotted-decimal IPv4 (four decimal parts,
 * 0 to 255, no leading zero) and an RFC 4291 IPv6 literal (optionally in brackets), without
 * a zone id and not one of the forms that carry an IPv4 address (IPv4-mapped `::ffff:0:0/96`,
 * -compatible `::/96`, SIIT-translated `::ffff:0:0:0/96`, NAT64 `64:ff9b::/96` and
 * `64:ff9b:1::/48`): those are refused as literals, as is every other numeric-looking form.
 * Anything else must be a plain DNS name (letters, digits, `-`, `_`; labels of 1 to 63, at
 * most 253 in all, no trailing dot, no `%`, and a last label that is not a number, which
 * WHATWG URLs and `inet_aton` would read as IPv4) and is resolved once by the caller. Pure;
 * written by hand because no parser here is strict in the same way (docs/decisions.md).
 *
 * @module
 */

/** An IP address as bytes (4 for IPv4, 16 for IPv6) and its canonical text. */
export interface IpAddress {
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** The address's bytes. */
  readonly bytes: Uint8Array;
  /** {@link formatAddress} of the bytes: what is dialled and compared. */
  readonly text: string;
}

/** What a host text is: an address, a name to resolve, or refused (`undefined`). */
export type ParsedHost = { kind: "ip"; ip: IpAddress } | { kind: "name"; name: string };

const DEC_OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]\\d|\\d)";
const CANONICAL_V4 = new RegExp(`^${DEC_OCTET}\\.${DEC_OCTET}\\.${DEC_OCTET}\\.${DEC_OCTET}$`);
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const NUMERIC_LABEL = /^(?:0x[0-9a-f]*|\d+)$/;

/** The bytes of a canonical dotted-decimal IPv4 address, or undefined. */
function v4Bytes(text: string): Uint8Array | undefined {
  const m = CANONICAL_V4.exec(text);
  return m ? Uint8Array.from(m.slice(1, 5).map(Number)) : undefined;
}

/** The 16 bytes of a strict IPv6 literal (no zone, no brackets), or undefined. */
function v6Bytes(text: string): Uint8Array | undefined {
  if (!/^[0-9a-fA-F:.]+$/.test(text) || text.length > 45) return undefined;
  let s = text;
  let tail4: Uint8Array | undefined;
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".")) {
    tail4 = v4Bytes(s.slice(lastColon + 1));
    if (!tail4) return undefined;
    s = s.slice(0, lastColon + 1) + "0:0";
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === "") return [];
    const out: number[] = [];
    for (const g of h.split(":")) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  const all = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 255;
  });
  if (tail4) out.set(tail4, 12);
  return out;
}

/** The canonical text of an address: dotted decimal, or RFC 5952 IPv6 (lowercase, `::`). */
export function formatAddress(bytes: Uint8Array): string {
  if (bytes.length === 4) return [...bytes].join(".");
  if (bytes.length !== 16) {
    throw new RangeError(`an address has 4 or 16 bytes, not ${bytes.length}`);
  }
  const g = Array.from({ length: 8 }, (_, i) => (bytes[2 * i]! << 8) | bytes[2 * i + 1]!);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (a: number[]) => a.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(g);
  return `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

function ipOf(bytes: Uint8Array): IpAddress {
  return { family: bytes.length === 4 ? 4 : 6, bytes, text: formatAddress(bytes) };
}

/**
 * An address in either accepted literal form (IPv6 possibly in brackets), or undefined.
 * For an address the system reports (an interface, a DNS answer): IPv6 forms carrying an
 * IPv4 address are kept, since a DNS64 answer is one; {@link parseHost} refuses them.
 */
export function parseIp(text: string): IpAddress | undefined {
  const v4 = v4Bytes(text);
  if (v4) return ipOf(v4);
  const inner = /^\[(.*)\]$/.exec(text)?.[1] ?? text;
  const v6 = inner.includes(":") ? v6Bytes(inner) : undefined;
  return v6 ? ipOf(v6) : undefined;
}

/** True for IPv6 bytes in a range that carries an IPv4 address (mapped, compatible, NAT64…). */
export function carriesV4(b: Uint8Array): boolean {
  if (b.length !== 16) return false;
  const zero = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return true; // ::ffff:0:0/96 mapped
  if (zero(0, 12)) return !(zero(12, 15) && b[15]! <= 1); // ::/96 compatible, but :: and ::1
  if (zero(0, 8) && b[8] === 0xff && b[9] === 0xff && zero(10, 12)) return true; // SIIT
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    return zero(4, 12) || (b[4] === 0 && b[5] === 1); // 64:ff9b::/96, 64:ff9b:1::/48
  }
  return false;
}

/**
 * The one parse of a host a guest names: a canonical IPv4 or a plain IPv6 literal as bytes,
 * a DNS name (lowercased) to resolve, or undefined for every other form (refused, never
 * dialled or looked up).
 */
export function parseHost(text: string): ParsedHost | undefined {
  if (text.startsWith("[")) {
    const ip = text.endsWith("]") ? parseIp(text) : undefined;
    return ip?.family === 6 && !carriesV4(ip.bytes) ? { kind: "ip", ip } : undefined;
  }
  if (text.includes(":")) {
    const ip = parseIp(text);
    return ip?.family === 6 && !carriesV4(ip.bytes) ? { kind: "ip", ip } : undefined;
  }
  const v4 = v4Bytes(text);
  if (v4) return { kind: "ip", ip: ipOf(v4) };
  const name = text.toLowerCase();
  if (name.length === 0 || name.length > 253) return undefined;
  const labels = name.split(".");
  if (!labels.every((l) => LABEL.test(l))) return undefined;
  // A last label that is a number makes the whole an IPv4 form to URL parsers and inet_aton.
  if (NUMERIC_LABEL.test(labels[labels.length - 1]!)) return undefined;
  return { kind: "name", name };
}
