/**
 * The address-form table (issue 18, part 2): each host form a guest can name beside what
 * Linux would dial for it and what the proxy's guard decides. The "Linux" columns are not
 * ours: a python3 process asks the real libc (`getaddrinfo` with `AI_NUMERICHOST`, which is
 * how glibc reads a numeric host before any DNS, and `inet_aton`), and the test first checks
 * that the table's columns are what libc says. Then, for every row, the guard's decision
 * must be the table's, and the differential must be empty: whenever the guard dials an
 * address for a form that libc reads as an address, libc reads it as the same bytes, and
 * the text the proxy dials reads back in libc as those same bytes. A parser that reads a
 * form as one address while `Deno.connect` (glibc) dials another shows as a failing row.
 */

import { deepStrictEqual, equal } from "node:assert/strict";
import { guardedAddresses, targetAllowed } from "../proxy/egress/guard.ts";
import type { IpAddress } from "../proxy/egress/address.ts";

/** [form, getaddrinfo numeric reading ("name" when none), inet_aton reading, guard decision]. */
const ROWS: [string, string, string, string][] = [
  // canonical
  ["8.8.8.8", "8.8.8.8", "8.8.8.8", "dial 8.8.8.8"],
  ["10.0.0.1", "10.0.0.1", "10.0.0.1", "refused"],
  ["127.0.0.1", "127.0.0.1", "127.0.0.1", "refused"],
  ["0.0.0.0", "0.0.0.0", "0.0.0.0", "refused"],
  // octal parts, leading zeros
  ["012.0.0.1", "10.0.0.1", "10.0.0.1", "refused"],
  ["0177.0.0.1", "127.0.0.1", "127.0.0.1", "refused"],
  ["010.010.010.010", "8.8.8.8", "8.8.8.8", "refused"],
  ["01.2.3.4", "1.2.3.4", "1.2.3.4", "refused"],
  ["8.8.8.010", "8.8.8.8", "8.8.8.8", "refused"],
  ["08.8.8.8", "name", "-", "refused"],
  ["00000000010.0.0.1", "8.0.0.1", "8.0.0.1", "refused"],
  // hex parts
  ["0x7f.0.0.1", "127.0.0.1", "127.0.0.1", "refused"],
  ["0x0a.0.0.1", "10.0.0.1", "10.0.0.1", "refused"],
  ["0x8.0x8.0x8.0x8", "8.8.8.8", "8.8.8.8", "refused"],
  ["0X7F.1", "127.0.0.1", "127.0.0.1", "refused"],
  ["0x7f000001", "127.0.0.1", "127.0.0.1", "refused"],
  ["0x", "name", "-", "refused"],
  ["a.0x10", "name", "-", "refused"],
  // fewer than four parts
  ["127.1", "127.0.0.1", "127.0.0.1", "refused"],
  ["10.1", "10.0.0.1", "10.0.0.1", "refused"],
  ["10.0.1", "10.0.0.1", "10.0.0.1", "refused"],
  ["8.8.2056", "8.8.8.8", "8.8.8.8", "refused"],
  // one 32-bit integer
  ["2130706433", "127.0.0.1", "127.0.0.1", "refused"],
  ["167772161", "10.0.0.1", "10.0.0.1", "refused"],
  ["134744072", "8.8.8.8", "8.8.8.8", "refused"],
  ["017700000001", "127.0.0.1", "127.0.0.1", "refused"],
  ["0", "0.0.0.0", "0.0.0.0", "refused"],
  ["4294967296", "name", "-", "refused"],
  // out of range, trailing dot or junk, percent-encoding
  ["1.2.3.256", "name", "-", "refused"],
  ["1.2.3.4.5", "name", "-", "refused"],
  ["10.0.0.1.", "name", "-", "refused"],
  ["10.0.0.1 x", "name", "10.0.0.1", "refused"],
  ["8.8.8.8\t", "name", "8.8.8.8", "refused"],
  ["%31%30.0.0.1", "name", "-", "refused"],
  ["10.0.0.1%", "name", "-", "refused"],
  // IPv6: plain, zones, forms carrying IPv4
  ["[2606:4700::1111]", "2606:4700::1111", "-", "dial 2606:4700::1111"],
  ["2606:4700:0:0:0:0:0:1111", "2606:4700::1111", "-", "dial 2606:4700::1111"],
  ["[2606:4700::01111]", "name", "-", "refused"],
  ["[::1]", "::1", "-", "refused"],
  ["[fe80::1%eth0]", "fe80::1", "-", "refused"],
  ["[fe80::1%25eth0]", "name", "-", "refused"],
  ["[::ffff:10.0.0.1]", "::ffff:10.0.0.1", "-", "refused"],
  ["[::ffff:8.8.8.8]", "::ffff:8.8.8.8", "-", "refused"],
  ["[::ffff:a00:1]", "::ffff:10.0.0.1", "-", "refused"],
  ["[::ffff:012.0.0.1]", "name", "-", "refused"],
  ["[::10.0.0.1]", "::10.0.0.1", "-", "refused"],
  ["[::ffff:0:10.0.0.1]", "::ffff:0:a00:1", "-", "refused"],
  ["[64:ff9b::10.0.0.1]", "64:ff9b::a00:1", "-", "refused"],
  ["[64:ff9b::808:808]", "64:ff9b::808:808", "-", "refused"],
  ["[64:ff9b:1::a00:1]", "64:ff9b:1::a00:1", "-", "refused"],
  ["[2002:a00:1::1]", "2002:a00:1::1", "-", "refused"],
  ["[2002:808:808::1]", "2002:808:808::1", "-", "dial 2002:808:808::1"],
  // names: resolved once (a fake resolver), the answers checked, an answer dialled
  ["example.com", "name", "-", "dial 93.184.215.14"],
  ["EXAMPLE.com", "name", "-", "dial 93.184.215.14"],
  ["example.com.", "name", "-", "refused"],
  ["exa mple.com", "name", "-", "refused"],
  ["localhost", "name", "-", "refused"],
  ["rebound.test", "name", "-", "refused"],
  ["mixed.test", "name", "-", "dial 8.8.8.8"],
  ["mapped.test", "name", "-", "refused"],
  ["dns64.test", "name", "-", "dial 64:ff9b::808:808"],
  ["dns64-private.test", "name", "-", "refused"],
  ["1e1", "name", "-", "refused"],
  ["", "name", "-", "refused"],
];

const DNS: Record<string, string[]> = {
  "example.com": ["93.184.215.14"],
  "localhost": ["127.0.0.1", "::1"],
  "rebound.test": ["10.0.0.1"],
  "mixed.test": ["10.0.0.1", "8.8.8.8"],
  "mapped.test": ["::ffff:10.0.0.1"],
  "dns64.test": ["64:ff9b::808:808"],
  "dns64-private.test": ["64:ff9b::a00:1"],
};

const ORACLE = `
import json, socket, sys
out = {}
for s in json.load(sys.stdin):
    h = s[1:-1] if s.startswith("[") and s.endswith("]") else s
    try:
        a = socket.getaddrinfo(h, 80, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)[0][4][0]
        fam = socket.AF_INET6 if ":" in a else socket.AF_INET
        gai = [a, socket.inet_pton(fam, a.split("%")[0]).hex()]
    except (socket.gaierror, UnicodeError, ValueError):
        gai = ["name", ""]
    try:
        aton = socket.inet_ntoa(socket.inet_aton(h))
    except (OSError, ValueError):
        aton = "-"
    out[s] = {"gai": gai, "aton": aton}
json.dump(out, sys.stdout)
`;

/** What the real libc makes of each text. */
async function libc(
  texts: string[],
): Promise<Record<string, { gai: [string, string]; aton: string }>> {
  const p = new Deno.Command("python3", {
    args: ["-c", ORACLE],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(JSON.stringify(texts)));
  await w.close();
  const r = await p.output();
  equal(r.code, 0, new TextDecoder().decode(r.stderr));
  return JSON.parse(new TextDecoder().decode(r.stdout));
}

const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");

async function decide(form: string): Promise<IpAddress | undefined> {
  const guard = {
    resolve: (name: string) => Promise.resolve(DNS[name] ?? []),
    allows: (ip: IpAddress) => targetAllowed(ip, { own: new Set<string>(), subnets: [] }),
  };
  try {
    return (await guardedAddresses(form, guard))[0];
  } catch {
    return undefined;
  }
}

Deno.test("the address-form table: the guard dials only what libc reads the same way", async () => {
  equal(ROWS.length >= 40, true);
  const decided = await Promise.all(ROWS.map(([form]) => decide(form)));
  const oracle = await libc([
    ...ROWS.map(([f]) => f),
    ...decided.flatMap((d) => d ? [d.text] : []),
  ]);
  const mismatches: string[] = [];
  ROWS.forEach(([form, gai, aton, want], i) => {
    const o = oracle[form]!;
    const d = decided[i];
    const got = d ? `dial ${d.text}` : "refused";
    const row = `${JSON.stringify(form)}: libc ${o.gai[0]} / ${o.aton}, guard ${got}`;
    if (o.gai[0] !== gai || o.aton !== aton) {
      mismatches.push(`${row} (table says libc ${gai} / ${aton})`);
    }
    if (got !== want) mismatches.push(`${row} (table says guard ${want})`);
    if (d) {
      // The differential: a form libc reads as an address is dialled as those bytes only.
      if (o.gai[0] !== "name" && o.gai[1] !== hex(d.bytes)) {
        mismatches.push(`${row}: DIFFERENT BYTES`);
      }
      // And the text handed to Deno.connect reads back as the checked bytes.
      if (oracle[d.text]!.gai[1] !== hex(d.bytes)) {
        mismatches.push(`${row}: dialled text reads otherwise`);
      }
    }
    // libc reading a private or special address from a form the guard let through is the hole.
    if (d && o.aton !== "-" && o.aton !== d.text) {
      mismatches.push(`${row}: inet_aton reads ${o.aton}`);
    }
  });
  deepStrictEqual(mismatches, []);
});
