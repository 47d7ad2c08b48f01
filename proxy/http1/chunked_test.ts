import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { ChunkedDecoder, chunkHead, LAST_CHUNK } from "./chunked.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Feeds `parts` in order; returns the payload, where the body ended overall, or the error. */
function decode(parts: Uint8Array[]): { payload: string; end: number } | { error: string } {
  const d = new ChunkedDecoder();
  const out: number[] = [];
  let offset = 0;
  for (const part of parts) {
    let pos = 0;
    while (pos < part.length && !d.done) {
      pos = d.step(part, pos, part.length);
      if (pos < 0) return { error: d.error };
      out.push(...part.subarray(d.segStart, d.segEnd));
    }
    if (d.done) return { payload: dec.decode(new Uint8Array(out)), end: offset + pos };
    offset += part.length;
  }
  return { error: "unfinished" };
}

const GOOD: { name: string; body: string; payload: string }[] = [
  { name: "one chunk", body: "5\r\nhello\r\n0\r\n\r\n", payload: "hello" },
  {
    name: "several chunks with upper-case sizes",
    body: "3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n",
    payload: "abc0123456789",
  },
  { name: "an extension", body: "3;name=val\r\nabc\r\n0 ; x\r\n\r\n", payload: "abc" },
  { name: "a trailer", body: "2\r\nhi\r\n0\r\nx-t: 1\r\ny: 2\r\n\r\n", payload: "hi" },
  { name: "an empty body", body: "0\r\n\r\n", payload: "" },
  { name: "CRLF inside the payload", body: "4\r\n\r\n\r\n\r\n0\r\n\r\n", payload: "\r\n\r\n" },
];

for (const c of GOOD) {
  Deno.test(`ChunkedDecoder reads ${c.name} identically at every cut`, () => {
    const bytes = enc.encode(c.body + "NEXT");
    const want = { payload: c.payload, end: bytes.length - 4 };
    assertEquals(decode([bytes]), want);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const parts = [bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)];
        assertEquals(decode(parts), want, `cuts at ${i}, ${j}`);
      }
    }
  });
}

const BAD: { name: string; body: string }[] = [
  { name: "a size that is not hex", body: "g\r\n" },
  { name: "a missing size", body: "\r\nabc\r\n" },
  { name: "a bare LF after the size", body: "3\nabc\r\n0\r\n\r\n" },
  { name: "a chunk longer than its size", body: "3\r\nabcd\r\n0\r\n\r\n" },
  { name: "a size of 14 hex digits", body: "10000000000000\r\n" },
  { name: "a bare LF in the trailer", body: "0\r\nx: 1\n\r\n" },
  { name: "a bare CR at the end", body: "0\r\n\rx" },
];

for (const c of BAD) {
  Deno.test(`ChunkedDecoder refuses ${c.name} at every cut`, () => {
    const bytes = enc.encode(c.body);
    for (let i = 0; i <= bytes.length; i++) {
      const got = decode([bytes.slice(0, i), bytes.slice(i)]);
      ok("error" in got && got.error !== "unfinished", `cut at ${i}: ${JSON.stringify(got)}`);
    }
  });
}

Deno.test("ChunkedDecoder refuses an over-long extension and trailer", () => {
  ok("error" in decode([enc.encode(`1;${"x".repeat(5000)}\r\n`)]));
  ok("error" in decode([enc.encode(`0\r\n${"x: y\r\n".repeat(20000)}\r\n`)]));
});

Deno.test("chunkHead and LAST_CHUNK frame a payload the decoder reads back", () => {
  const body = chunkHead(300) + "z".repeat(300) + "\r\n" + LAST_CHUNK;
  equal(chunkHead(300), "12c\r\n");
  assertEquals(decode([enc.encode(body)]), { payload: "z".repeat(300), end: body.length });
});
