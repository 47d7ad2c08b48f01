import { deepStrictEqual, equal } from "node:assert/strict";
import { carriesV4, formatAddress, parseHost, parseIp } from "./address.ts";

Deno.test("formatAddress writes RFC 5952 text: lowercase, longest zero run as ::, no leading zeros", () => {
  const CASES: [string, string][] = [
    ["2001:0DB8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // first of two equal runs
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"], // a single zero group stays
    ["0:0:0:0:0:0:0:0", "::"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["fe80:0:0:0:0:0:0:0", "fe80::"],
    ["2606:4700::1111", "2606:4700::1111"],
  ];
  for (const [text, want] of CASES) equal(parseIp(text)?.text, want, text);
  equal(formatAddress(Uint8Array.from([10, 0, 0, 1])), "10.0.0.1");
});

Deno.test("parseHost takes canonical literals and plain names, refuses every other form", () => {
  deepStrictEqual(parseHost("8.8.8.8")?.kind, "ip");
  deepStrictEqual(parseHost("[2606:4700::1111]")?.kind, "ip");
  deepStrictEqual(parseHost("Api.Anthropic.COM"), { kind: "name", name: "api.anthropic.com" });
  deepStrictEqual(parseHost("_dmarc.example.com")?.kind, "name");
  for (
    const bad of [
      "012.0.0.1",
      "0x7f.1",
      "127.1",
      "2130706433",
      "1.2.3.4.",
      "example.com.",
      "a..b",
      "-a.com",
      "a-.com",
      "ex%41mple.com",
      "[fe80::1%eth0]",
      "[::ffff:10.0.0.1]",
      "[64:ff9b::a00:1]",
      "[2606:4700::1111",
      "[8.8.8.8]",
      "user@example.com",
      "a".repeat(64) + ".com",
      `${"a.".repeat(127)}com`,
      "",
    ]
  ) {
    equal(parseHost(bad), undefined, bad);
  }
});

Deno.test("carriesV4 names the IPv6 ranges that carry an IPv4 address, not :: or ::1", () => {
  const b = (t: string) => parseIp(t)!.bytes;
  for (const t of ["::ffff:1.2.3.4", "::1.2.3.4", "::ffff:0:1.2.3.4", "64:ff9b::1.2.3.4"]) {
    equal(carriesV4(b(t)), true, t);
  }
  for (const t of ["::", "::1", "2606:4700::1111", "2002:808:808::1"]) {
    equal(carriesV4(b(t)), false, t);
  }
});
