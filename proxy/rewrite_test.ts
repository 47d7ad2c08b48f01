import { deepStrictEqual as assertEquals, ok } from "node:assert/strict";
import {
  applyHeaderOps,
  forwardableHeaders,
  type Replacement,
  responseHeaders,
  rewriteStream,
  scrubPairs,
  scrubText,
  StreamRewriter,
} from "./rewrite.ts";
import { Secret } from "./secret.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

function pairs(map: Record<string, string>): Replacement[] {
  return Object.entries(map).map(([f, t]) => ({ from: enc.encode(f), to: enc.encode(t) }));
}

function whole(p: Replacement[], text: string): string {
  const rw = new StreamRewriter(p);
  return dec.decode(rw.push(enc.encode(text))) + dec.decode(rw.flush());
}

const CASES: { name: string; map: Record<string, string>; input: string; want: string }[] = [
  { name: "one value", map: { "sk-real": "*******" }, input: "a sk-real b", want: "a ******* b" },
  { name: "values back to back", map: { abc: "X" }, input: "abcabcab", want: "XXab" },
  { name: "a value at both ends", map: { key: "K" }, input: "key-middle-key", want: "K-middle-K" },
  {
    name: "a longer pattern starting at the same place",
    map: { cd: "1", cdef: "2" },
    input: "xxcdefxcdx",
    want: "xx2x1x",
  },
  {
    name: "overlapping patterns, the earliest wins",
    map: { abcdef: "L", cd: "s" },
    input: "zabcdefz abcdz",
    want: "zLz absz",
  },
  { name: "a near miss", map: { "secret!": "-" }, input: "secret? secre", want: "secret? secre" },
  {
    name: "placeholders to values",
    map: { "sk-placeholder": "sk-REAL-VALUE-1234" },
    input: "Bearer sk-placeholder",
    want: "Bearer sk-REAL-VALUE-1234",
  },
  { name: "multi-byte text", map: { "é-key": "*" }, input: "ééé-key-é", want: "éé*-é" },
];

for (const c of CASES) {
  Deno.test(`StreamRewriter replaces ${c.name} identically at every cut`, () => {
    const p = pairs(c.map);
    assertEquals(whole(p, c.input), c.want);
    const bytes = enc.encode(c.input);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const rw = new StreamRewriter(p);
        const parts = [
          rw.push(bytes.slice(0, i)),
          rw.push(bytes.slice(i, j)),
          rw.push(bytes.slice(j)),
          rw.flush(),
        ];
        assertEquals(dec.decode(concat(parts)), c.want, `cuts at ${i}, ${j}`);
      }
    }
  });
}

Deno.test("StreamRewriter passes chunks through untouched when it has no patterns", () => {
  const rw = new StreamRewriter([]);
  const chunk = enc.encode("hello");
  ok(rw.empty);
  ok(rw.push(chunk) === chunk);
});

Deno.test("rewriteStream scrubs a value split across many chunks", async () => {
  const secret = new Secret("sk-ant-api03-REALREALREAL");
  const text = `{"echo":"${secret.reveal()}","again":"${secret.reveal()}"}`;
  const chunks = [...enc.encode(text)].map((b) => new Uint8Array([b]));
  const body = ReadableStream.from(chunks).pipeThrough(rewriteStream(scrubPairs([secret])));
  const out = await new Response(body).text();
  ok(!out.includes(secret.reveal()));
  assertEquals(out.length, text.length);
});

Deno.test("scrubText masks every occurrence", () => {
  const s = new Secret("gho_real");
  assertEquals(scrubText("a gho_real b gho_real", [s]), "a ******** b ********");
});

Deno.test("forwardableHeaders drops hop-by-hop, Connection-named and isx headers", () => {
  const h = new Headers({
    connection: "keep-alive, x-drop",
    "x-drop": "1",
    "keep-alive": "timeout=5",
    "x-isx-instance-secret": "abc",
    "x-keep": "2",
    "transfer-encoding": "chunked",
  });
  assertEquals([...forwardableHeaders(h)], [["x-keep", "2"]]);
});

Deno.test("applyHeaderOps sets, deletes, swaps a Basic password and substitutes placeholders", () => {
  const h = new Headers({
    "x-api-key": "sk-ant-placeholder",
    authorization: `Basic ${btoa("alice:gho_placeholder")}`,
    "x-custom": "token=PLACEHOLDER_1;",
  });
  applyHeaderOps(h, [
    { op: "delete", name: "x-api-key" },
    { op: "basic", value: new Secret("gho_real"), user: "x-access-token", keepGuestUser: true },
    { op: "substitute", placeholder: "PLACEHOLDER_1", value: new Secret("v4lue") },
    { op: "set", name: "x-other", value: new Secret("tok"), prefix: "Bearer " },
  ]);
  assertEquals(h.get("x-api-key"), null);
  assertEquals(atob(h.get("authorization")!.slice(6)), "alice:gho_real");
  assertEquals(h.get("x-custom"), "token=v4lue;");
  assertEquals(h.get("x-other"), "Bearer tok");
});

Deno.test("applyHeaderOps uses the default Basic user when the guest sent none", () => {
  const h = new Headers();
  applyHeaderOps(h, [{
    op: "basic",
    value: new Secret("t"),
    user: "x-access-token",
    keepGuestUser: true,
  }]);
  assertEquals(atob(h.get("authorization")!.slice(6)), "x-access-token:t");
});

Deno.test("responseHeaders scrubs real values out of header values", () => {
  const s = new Secret("sk-REAL");
  const h = responseHeaders(new Headers({ "x-echo": "key sk-REAL", connection: "close" }), [s]);
  assertEquals([...h], [["x-echo", "key *******"]]);
});

Deno.test("Secret never prints its value", () => {
  const s = new Secret("sk-ant-very-real");
  const shown = [
    Deno.inspect(s),
    JSON.stringify({ s }),
    String(s),
    `${s}`,
    Deno.inspect({ nested: [s] }),
  ];
  for (const text of shown) ok(!text.includes("very-real"), text);
  ok(Deno.inspect(new StreamRewriter(scrubPairs([s]))).indexOf("very-real") < 0);
});

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
