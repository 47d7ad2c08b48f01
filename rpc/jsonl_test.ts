import assert from "node:assert/strict";
import { encodeLine, lines, TextLineStream } from "./jsonl.ts";

async function split(chunks: string[]): Promise<string[]> {
  const out: string[] = [];
  const src = ReadableStream.from(chunks).pipeThrough(new TextLineStream());
  for await (const l of src) out.push(l);
  return out;
}

Deno.test("TextLineStream splits at every cut like a whole read", async () => {
  const text = 'a\r\n\n{"x":1}\r\nlast\rx\n\r\ntail\r';
  const whole = await split([text]);
  assert.deepEqual(whole, ["a", "", '{"x":1}', "last\rx", "", "tail"]);
  for (let i = 0; i <= text.length; i++) {
    for (let j = i; j <= text.length; j++) {
      assert.deepEqual(
        await split([text.slice(0, i), text.slice(i, j), text.slice(j)]),
        whole,
        `cut at ${i},${j}`,
      );
    }
  }
});

Deno.test("TextLineStream keeps a 10 MiB line whole across 64 KiB chunks", async () => {
  const big = "x".repeat(10 * 1024 * 1024);
  const text = `${big}\nnext\n`;
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += 65536) chunks.push(text.slice(i, i + 65536));
  const out = await split(chunks);
  assert.equal(out.length, 2);
  assert.equal(out[0]?.length, big.length);
  assert.equal(out[1], "next");
});

Deno.test("lines decodes UTF-8 split inside a character", async () => {
  const bytes = new TextEncoder().encode("héllo\n€\n");
  const parts = [bytes.slice(0, 2), bytes.slice(2, 7), bytes.slice(7)];
  const out: string[] = [];
  for await (const l of lines(ReadableStream.from(parts))) out.push(l);
  assert.deepEqual(out, ["héllo", "€"]);
});

Deno.test("encodeLine writes one compact line", () => {
  assert.equal(encodeLine({ a: [1, "x\ny"] }), '{"a":[1,"x\\ny"]}\n');
});
