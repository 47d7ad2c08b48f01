import assert from "node:assert/strict";
import { encodeLine, lineOutput, lines, textLineStream } from "./jsonl.ts";

async function split(chunks: string[]): Promise<string[]> {
  const out: string[] = [];
  const src = ReadableStream.from(chunks).pipeThrough(textLineStream());
  for await (const l of src) out.push(l);
  return out;
}

Deno.test("textLineStream splits at every cut like a whole read", async () => {
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

Deno.test("textLineStream keeps a 10 MiB line whole across 64 KiB chunks", async () => {
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

/** A reader that hands out `parts`, one per read, as a pipe might. */
function reader(parts: Uint8Array[]) {
  return {
    read(p: Uint8Array): Promise<number | null> {
      const next = parts.shift();
      if (!next) return Promise.resolve(null);
      p.set(next.subarray(0, p.length));
      if (next.length > p.length) parts.unshift(next.subarray(p.length));
      return Promise.resolve(Math.min(next.length, p.length));
    },
  };
}

Deno.test("lines from a plain reader split and decode as from a stream", async () => {
  const text = '\uFEFFa\r\n\n{"x":"héllo €"}\r\nlast\rx\n\r\ntail\r';
  const bytes = new TextEncoder().encode(text);
  const fromStream: string[] = [];
  for await (const l of lines(ReadableStream.from([bytes]))) fromStream.push(l);
  assert.deepEqual(fromStream, ["a", "", '{"x":"héllo €"}', "last\rx", "", "tail"]);
  for (let i = 0; i <= bytes.length; i++) {
    const out: string[] = [];
    for await (const l of lines(reader([bytes.slice(0, i), bytes.slice(i)]))) out.push(l);
    assert.deepEqual(out, fromStream, `cut at ${i}`);
  }
  // a line longer than one read, and a bad byte replaced as TextDecoderStream does
  const big = new Uint8Array([...new TextEncoder().encode("y".repeat(200_000)), 0xff, 10]);
  const out: string[] = [];
  for await (const l of lines(reader([big]))) out.push(l);
  assert.deepEqual(out, ["y".repeat(200_000) + "\uFFFD"]);
});

Deno.test("a plain writer gets every line whole and in order, even one short write at a time", async () => {
  const got: number[] = [];
  let calls = 0;
  const out = lineOutput({
    async write(p: Uint8Array): Promise<number> {
      calls++;
      await new Promise((r) => setTimeout(r, p.length % 3)); // out of step
      got.push(p[0]!);
      return 1; // one byte at a time
    },
  });
  const writes = [new Uint8Array([1, 2, 3]), new Uint8Array([4]), new Uint8Array([5, 6])];
  await Promise.all(writes.map((w) => out.write(w)));
  await out.close();
  assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
  assert.equal(calls, 6);
  // a broken output rejects that write and the ones after it, and close still settles
  const broken = lineOutput({ write: () => Promise.reject(new Error("EPIPE")) });
  await assert.rejects(broken.write(new Uint8Array([1])), /EPIPE/);
  await assert.rejects(broken.write(new Uint8Array([2])), /EPIPE/);
  await broken.close();
});
