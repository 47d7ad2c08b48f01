import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { bodyKind, SSE_LINE_CAP, type Usage, usageOf, UsageReader } from "./usage.ts";
import type { ModelProvider } from "./activity.ts";

const enc = new TextEncoder();

function u(i: number, o: number, cr = 0, cc = 0): Usage {
  return {
    input_tokens: i,
    output_tokens: o,
    cache_read_input_tokens: cr,
    cache_creation_input_tokens: cc,
  };
}

const ANTHROPIC_SSE = [
  "event: message_start",
  'data: {"type":"message_start","message":{"id":"m1","usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":7}}}',
  "",
  "event: content_block_delta",
  'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"héllo \\"usage\\""}}',
  "",
  "event: message_delta",
  'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}',
  "",
  "event: message_stop",
  'data: {"type":"message_stop"}',
  "",
  "",
].join("\r\n");

const OPENAI_RESPONSES_SSE = [
  "event: response.created",
  'data: {"type":"response.created","response":{"id":"r1","usage":null}}',
  "",
  "event: response.completed",
  'data: {"type":"response.completed","response":{"id":"r1","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":200},"output_tokens":42}}}',
  "",
  "",
].join("\n");

const OPENAI_CHAT_SSE = [
  'data: {"choices":[{"delta":{"content":"hi"}}]}',
  "",
  'data: {"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":10}}}',
  "",
  "data: [DONE]",
  "",
  "",
].join("\n");

const CASES: {
  name: string;
  provider: ModelProvider;
  kind: "sse" | "json";
  body: string;
  want: Usage;
}[] = [
  {
    name: "anthropic SSE",
    provider: "anthropic",
    kind: "sse",
    body: ANTHROPIC_SSE,
    want: u(25, 15, 100, 7),
  },
  {
    name: "anthropic JSON",
    provider: "anthropic",
    kind: "json",
    body:
      '{"id":"m","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":12,"output_tokens":34}}',
    want: u(12, 34),
  },
  {
    name: "OpenAI Responses SSE",
    provider: "openai",
    kind: "sse",
    body: OPENAI_RESPONSES_SSE,
    want: u(100, 42, 200),
  },
  {
    name: "OpenAI Chat SSE",
    provider: "openai",
    kind: "sse",
    body: OPENAI_CHAT_SSE,
    want: u(40, 9, 10),
  },
  {
    name: "OpenAI Chat JSON",
    provider: "openai",
    kind: "json",
    body: '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}',
    want: u(5, 6),
  },
  {
    name: "a body that is not JSON",
    provider: "anthropic",
    kind: "json",
    body: "<html>usage</html>",
    want: u(0, 0),
  },
  {
    name: "SSE mentioning usage outside data lines",
    provider: "anthropic",
    kind: "sse",
    body: [
      'event: x_usage"',
      'data: {"note":"cache_usage\\"","usage":{"input_tokens":2,"output_tokens":3}}',
      ': "usage":{"input_tokens":99}',
      'data: {"type":"ping","xusage":{"output_tokens":98}}',
      "",
      "",
    ].join("\n"),
    want: u(2, 3),
  },
  {
    name: "SSE without a final newline",
    provider: "anthropic",
    kind: "sse",
    body: 'data: {"usage":{"input_tokens":3,"output_tokens":4}}',
    want: u(3, 4),
  },
];

function read(provider: ModelProvider, kind: "sse" | "json", chunks: Uint8Array[]): Usage {
  const r = new UsageReader(provider, kind);
  for (const c of chunks) r.push(c);
  return r.finish();
}

for (const c of CASES) {
  Deno.test(`UsageReader reads ${c.name} identically at every cut`, () => {
    const bytes = enc.encode(c.body);
    assertEquals(read(c.provider, c.kind, [bytes]), c.want);
    for (let i = 0; i <= bytes.length; i++) {
      // The reader must not keep references to the caller's buffer: reuse one.
      const buf = new Uint8Array(bytes.length);
      buf.set(bytes);
      const r = new UsageReader(c.provider, c.kind);
      r.push(buf.subarray(0, i));
      buf.fill(0, 0, i);
      r.push(bytes.subarray(i));
      assertEquals(r.finish(), c.want, `cut at ${i}`);
    }
  });
}

Deno.test("UsageReader reads byte-by-byte chunks of an SSE stream", () => {
  const bytes = enc.encode(ANTHROPIC_SSE);
  const chunks = [...bytes].map((b) => new Uint8Array([b]));
  assertEquals(read("anthropic", "sse", chunks), u(25, 15, 100, 7));
});

Deno.test("UsageReader skips an SSE line over the cap and reads the next", () => {
  const big = `data: {"usage":{"input_tokens":999},"pad":"${"x".repeat(SSE_LINE_CAP)}"}\n`;
  const next = 'data: {"usage":{"input_tokens":1,"output_tokens":2}}\n';
  assertEquals(read("anthropic", "sse", [enc.encode(big), enc.encode(next)]), u(1, 2));
});

Deno.test("usageOf ignores non-object and negative values", () => {
  assertEquals(usageOf("anthropic", null), []);
  assertEquals(usageOf("anthropic", { usage: { input_tokens: -4, output_tokens: "7" } }), [
    u(0, 0),
  ]);
});

Deno.test("bodyKind knows event streams and JSON only", () => {
  assertEquals(bodyKind("text/event-stream; charset=utf-8"), "sse");
  assertEquals(bodyKind("application/json"), "json");
  assertEquals(bodyKind("application/problem+json"), "json");
  assertEquals(bodyKind("text/html"), undefined);
  assertEquals(bodyKind(null), undefined);
});
