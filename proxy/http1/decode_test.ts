import { deepStrictEqual as assertEquals, equal } from "node:assert/strict";
import { brotliCompressSync } from "node:zlib";
import { type Coding, contentCodings, decodeStream, DecodingUsageReader } from "./decode.ts";
import { UsageReader } from "../activity/usage.ts";

const enc = new TextEncoder();

const SSE = [
  'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":11,"cache_read_input_tokens":5,"output_tokens":1}}}\n\n',
  'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"hello"}}\n\n',
  'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":7}}\n\n',
].join("");
const WANT = {
  input_tokens: 11,
  output_tokens: 7,
  cache_read_input_tokens: 5,
  cache_creation_input_tokens: 0,
};

async function compress(data: Uint8Array, format: CompressionFormat): Promise<Uint8Array> {
  const out = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new CompressionStream(format),
  );
  return new Uint8Array(await new Response(out).arrayBuffer());
}

/** The body as each coding (and HTTP `deflate` both ways servers send it). */
async function encodings(text: string): Promise<[string, Coding[], Uint8Array][]> {
  const raw = enc.encode(text);
  const gz = await compress(raw, "gzip");
  return [
    ["gzip", ["gzip"], gz],
    ["deflate (zlib)", ["deflate"], await compress(raw, "deflate")],
    ["deflate (raw)", ["deflate"], await compress(raw, "deflate-raw")],
    ["br", ["br"], new Uint8Array(brotliCompressSync(raw))],
    ["gzip, br", ["gzip", "br"], new Uint8Array(brotliCompressSync(gz))],
  ];
}

Deno.test("contentCodings lists known codings in order and rejects unknown ones", () => {
  assertEquals(contentCodings(null), []);
  assertEquals(contentCodings("identity"), []);
  assertEquals(contentCodings("GZIP"), ["gzip"]);
  assertEquals(contentCodings("x-gzip, br"), ["gzip", "br"]);
  assertEquals(contentCodings("deflate"), ["deflate"]);
  equal(contentCodings("zstd"), undefined);
  equal(contentCodings("gzip, compress"), undefined);
});

Deno.test("decodeStream undoes every known coding", async () => {
  for (const [name, codings, bytes] of await encodings(SSE)) {
    const out = decodeStream(new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(), codings);
    equal(await new Response(out).text(), SSE, name);
  }
});

Deno.test("DecodingUsageReader reads the same usage at every cut of the compressed body", async () => {
  for (const [name, codings, bytes] of await encodings(SSE)) {
    for (let cut = 0; cut <= bytes.length; cut++) {
      const r = new DecodingUsageReader(new UsageReader("anthropic", "sse"), codings);
      // The relay reuses its buffer: the reader must have copied what it was given.
      const buf = bytes.slice();
      r.push(buf.subarray(0, cut));
      buf.fill(0, 0, cut);
      buf.set(bytes.subarray(0, cut));
      r.push(buf.subarray(cut));
      buf.fill(0);
      assertEquals(await r.finish(), WANT, `${name} cut at ${cut}`);
    }
  }
});

Deno.test("DecodingUsageReader reads a compressed JSON body", async () => {
  const body = JSON.stringify({ id: "r", usage: { input_tokens: 3, output_tokens: 4 } });
  const r = new DecodingUsageReader(new UsageReader("openai", "json"), ["gzip"]);
  r.push(await compress(enc.encode(body), "gzip"));
  assertEquals(await r.finish(), {
    input_tokens: 3,
    output_tokens: 4,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  });
});

Deno.test("DecodingUsageReader keeps what it read from a cut-off or corrupt body", async () => {
  const gz = await compress(enc.encode(SSE), "gzip");
  const cutOff = new DecodingUsageReader(new UsageReader("anthropic", "sse"), ["gzip"]);
  cutOff.push(gz.subarray(0, gz.length - 8));
  const got = await cutOff.finish();
  equal(got.input_tokens, 11);
  const corrupt = new DecodingUsageReader(new UsageReader("anthropic", "sse"), ["br"]);
  corrupt.push(enc.encode("this is not brotli at all"));
  equal((await corrupt.finish()).output_tokens, 0);
});
