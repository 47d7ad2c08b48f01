import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { latin1, Scrubber } from "./scrub.ts";
import { Secret } from "../config/secret.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The reference: every byte of every occurrence of every value becomes `*`. */
function reference(values: string[], input: Uint8Array): Uint8Array {
  const out = input.slice();
  for (const v of values.map((v) => enc.encode(v)).filter((v) => v.length > 0)) {
    for (let i = 0; i + v.length <= input.length; i++) {
      if (v.every((b, j) => input[i + j] === b)) out.fill(0x2a, i, i + v.length);
    }
  }
  return out;
}

/** Feeds `chunks` as the relay does: held tail first, then the new bytes, in one buffer. */
function run(s: Scrubber, chunks: Uint8Array[]): Uint8Array {
  const out: number[] = [];
  let held = new Uint8Array(0);
  for (const c of chunks) {
    const buf = new Uint8Array(held.length + c.length);
    buf.set(held);
    buf.set(c, held.length);
    const n = s.scan(buf, buf.length, false);
    ok(buf.length - n <= s.maxHold, "holds back no more than a value's length");
    out.push(...buf.subarray(0, n));
    held = buf.slice(n);
  }
  const n = s.scan(held, held.length, true);
  equal(n, held.length);
  out.push(...held);
  return new Uint8Array(out);
}

const CASES: { name: string; values: string[]; input: string; want: string }[] = [
  { name: "one value", values: ["sk-real"], input: "a sk-real b", want: "a ******* b" },
  { name: "values back to back", values: ["abc"], input: "abcabcab", want: "******ab" },
  {
    name: "a value at both ends",
    values: ["key"],
    input: "key-middle-key",
    want: "***-middle-***",
  },
  {
    name: "a value inside another",
    values: ["cd", "cdef"],
    input: "xxcdefxcdx",
    want: "xx****x**x",
  },
  {
    name: "overlapping values",
    values: ["abcd", "cdef"],
    input: "zabcdefz abcdz",
    want: "z******z ****z",
  },
  { name: "a value overlapping itself", values: ["aba"], input: "xababax", want: "x*****x" },
  { name: "a near miss", values: ["secret!"], input: "secret? secre", want: "secret? secre" },
  { name: "multi-byte text", values: ["é-key"], input: "ééé-key-é", want: "éé******-é" },
  { name: "no values", values: [], input: "nothing to do", want: "nothing to do" },
];

for (const c of CASES) {
  Deno.test(`Scrubber masks ${c.name} identically at every cut`, () => {
    const bytes = enc.encode(c.input);
    const values = c.values.map((v) => enc.encode(v));
    assertEquals(dec.decode(run(new Scrubber(values), [bytes])), c.want);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const parts = [bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)];
        const got = dec.decode(run(new Scrubber(values), parts));
        equal(got, c.want, `cuts at ${i}, ${j}`);
      }
    }
  });
}

Deno.test("Scrubber matches the reference for random streams cut at random", () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed >>> 16) % n;
  };
  const word = (len: number) => Array.from({ length: len }, () => "abc"[rnd(3)]).join("");
  for (let round = 0; round < 400; round++) {
    const values = Array.from({ length: 1 + rnd(3) }, () => word(1 + rnd(5)));
    const input = enc.encode(word(rnd(60)));
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < input.length;) {
      const n = 1 + rnd(8);
      chunks.push(input.slice(at, at + n));
      at += n;
    }
    const want = dec.decode(reference(values, input));
    const got = dec.decode(run(new Scrubber(values.map((v) => enc.encode(v))), chunks));
    equal(got, want, `values ${JSON.stringify(values)}`);
  }
});

Deno.test("Scrubber holds back nothing when no tail could become a value", () => {
  const s = Scrubber.of([new Secret("sk-ant-api03-REAL")]);
  const buf = enc.encode("data: plain text\n\n");
  equal(s.scan(buf, buf.length, false), buf.length);
  const partial = enc.encode("data: sk-ant-");
  equal(s.scan(partial, partial.length, false), 6);
});

Deno.test("Scrubber masks a value in a buffer's middle without touching the rest", () => {
  const s = Scrubber.of([new Secret("sk-ant-api03-REALREALREAL")]);
  const head = enc.encode("prefix ");
  const buf = enc.encode("prefix sk-ant-api03-REALREALREAL suffix");
  const n = s.scan(buf, buf.length, false);
  equal(n, buf.length);
  equal(dec.decode(buf), `prefix ${"*".repeat(25)} suffix`);
  assertEquals(buf.subarray(0, head.length), head);
});

Deno.test("Scrubber prints no value", () => {
  const s = Scrubber.of([new Secret("very-real-value")]);
  ok(!Deno.inspect(s).includes("very-real"));
  ok(s.empty === false && Scrubber.of([]).empty);
});

Deno.test("latin1 gives one character per byte for all 256 values", () => {
  const all = new Uint8Array(256).map((_, i) => i);
  const text = latin1(all, 0, 256);
  equal(text.length, 256);
  for (let i = 0; i < 256; i++) equal(text.charCodeAt(i), i);
  equal(latin1(all.subarray(10), 2, 5), "\x0c\x0d\x0e");
});
