import { deepStrictEqual as assertEquals, equal, ok, rejects } from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import { parseCredentials, type VertexConfig } from "./credentials.ts";
import { Policy } from "./policy.ts";
import {
  isVertexModelPath,
  translateMessages,
  VERTEX_ANTHROPIC_VERSION,
  vertexHost,
  vertexModel,
} from "./vertex.ts";
import { type RunCommand, runCommand, vertexRef, VertexTokens } from "./vertex_token.ts";

const ALL = { grant: "all" } as const;

const CONFIG: VertexConfig = {
  project: "my-proj",
  region: "us-east5",
  tokenCommand: ["gcloud", "auth", "print-access-token"],
  tokenTtlMs: 60_000,
};

Deno.test("translateMessages keeps the allowed fields, drops model and adds anthropic_version", () => {
  const t = translateMessages(
    JSON.stringify({
      model: "claude-sonnet-4-5-20250929",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      context_management: { x: 1 },
      system: "s",
    }),
    CONFIG,
  );
  if ("error" in t) throw new TypeError(t.error);
  equal(
    t.path,
    "/v1/projects/my-proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
  );
  equal(t.stream, true);
  assertEquals(t.dropped, ["context_management"]);
  assertEquals(JSON.parse(t.body), {
    anthropic_version: VERTEX_ANTHROPIC_VERSION,
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
    stream: true,
    system: "s",
  });
  const plain = translateMessages('{"model":"claude-haiku-4-5@20251001","messages":[]}', CONFIG);
  ok(!("error" in plain) && plain.path.endsWith("claude-haiku-4-5@20251001:rawPredict"));
});

Deno.test("translateMessages refuses model ids that could change the upstream path", () => {
  const CASES = [
    "../../x",
    "claude/../../v1/projects/other",
    "claude?x=1",
    "claude#x",
    "claude%2f..",
    "claude:rawPredict",
    "",
    "a".repeat(200),
  ];
  for (const model of CASES) {
    const t = translateMessages(JSON.stringify({ model, messages: [] }), CONFIG);
    ok("error" in t, model);
  }
  for (const body of ["not json", "[1]", "null", '{"messages":[]}', '{"model":5}']) {
    ok("error" in translateMessages(body, CONFIG), body);
  }
});

Deno.test("vertexHost, vertexModel and isVertexModelPath follow §7.C", () => {
  equal(vertexHost("us-east5"), "us-east5-aiplatform.googleapis.com");
  equal(vertexHost("global"), "aiplatform.googleapis.com");
  equal(vertexModel("claude-opus-4-1-20250805"), "claude-opus-4-1@20250805");
  equal(vertexModel("claude-opus-4-1"), "claude-opus-4-1");
  const P = "/v1/projects/p/locations/r/publishers/anthropic/models/m";
  const CASES: [string, boolean][] = [
    [`${P}:rawPredict`, true],
    [`${P}:streamRawPredict`, true],
    [`${P}:streamRawPredict?alt=sse`, true],
    ["/v1/projects/p/locations/r/publishers/anthropic/models/count-tokens:rawPredict", false],
    [`${P}:predict`, false],
    ["/v1/messages", false],
  ];
  for (const [path, want] of CASES) equal(isVertexModelPath(path), want, path);
});

Deno.test("Policy with a Vertex account translates /v1/messages, forwards the rest and intercepts its host", () => {
  const p = new Policy(parseCredentials(`
anthropic:
  accounts:
    key: { api_key: sk-KEY }
    gcp: { vertex: { project: my-proj, region: us-east5 } }
`));
  ok(p.covers("us-east5-aiplatform.googleapis.com"));
  ok(p.translates("api.anthropic.com", "/v1/messages?beta=true"));
  const m = p.route({ host: "api.anthropic.com", path: "/v1/messages" }, ALL);
  ok(m.kind === "forward" && m.vertex?.mode === "translate" && m.model === "anthropic");
  const other = p.route({ host: "api.anthropic.com", path: "/v1/messages/count_tokens" }, ALL);
  ok(other.kind === "forward" && !other.vertex && !other.model);
  assertEquals(other.kind === "forward" && other.ops, [{ op: "delete", name: "x-api-key" }]);
  const host = "us-east5-aiplatform.googleapis.com";
  const direct = p.route({ host, path: "/v1/projects/my-proj/x/m:streamRawPredict" }, ALL);
  ok(direct.kind === "forward" && direct.vertex?.mode === "passthrough");
  equal(direct.kind === "forward" && direct.model, "anthropic");
  const tokens = p.route({ host, path: "/v1/projects/my-proj/x/count-tokens:rawPredict" }, ALL);
  equal(tokens.kind === "forward" && tokens.model, undefined);
  // An instance built for an API key keeps it (priority only picks the default).
  const key = p.route({ host: "api.anthropic.com", path: "/v1/messages" }, {
    grant: "all",
    templateAccounts: { claude: "key" },
  });
  ok(key.kind === "forward" && !key.vertex);
  const pinned = p.route({ host: "api.anthropic.com", path: "/v1/messages" }, {
    grant: "all",
    pins: { claude: "key" },
  });
  // A caller without the anthropic grant gets no token, even on the Vertex host.
  const stranger = p.route({ host, path: "/v1/projects/my-proj/x/m:rawPredict" }, { grant: [] });
  ok(stranger.kind === "forward" && !stranger.vertex && stranger.ops.length === 0);
  const noGrant = p.route({ host: "api.anthropic.com", path: "/v1/messages" }, { grant: [] });
  ok(noGrant.kind === "forward" && !noGrant.vertex && noGrant.ops.length === 0);
  equal(pinned.kind, "fail");
});

function fakeRun(outputs: { code?: number; out?: string; timedOut?: boolean }[]) {
  const calls: string[][] = [];
  const run: RunCommand = (argv) => {
    calls.push([...argv]);
    const o = outputs.shift() ?? { out: "" };
    return Promise.resolve({
      code: o.code ?? 0,
      stdout: new TextEncoder().encode(o.out ?? ""),
      ...(o.timedOut ? { timedOut: true } : {}),
    });
  };
  return { run, calls };
}

Deno.test("VertexTokens caches a token until its TTL and shares one run between callers", async () => {
  let now = 1000;
  const f = fakeRun([{ out: "ya29.FIRST\n" }, { out: "ya29.SECOND" }, { out: "ya29.THIRD" }]);
  const t = new VertexTokens({ run: f.run, now: () => now });
  const [a, b] = await Promise.all([t.get(CONFIG), t.get(CONFIG)]);
  equal(a!.reveal(), "ya29.FIRST");
  equal(b!.reveal(), "ya29.FIRST");
  equal(f.calls.length, 1);
  now += 59_000;
  equal((await t.get(CONFIG)).reveal(), "ya29.FIRST");
  now += 2_000;
  equal((await t.get(CONFIG)).reveal(), "ya29.SECOND");
  equal(t.secrets().length, 2);
  assertEquals(f.calls[0], ["gcloud", "auth", "print-access-token"]);
  const third = await t.refresh(vertexRef(CONFIG), await t.get(CONFIG));
  equal(third?.reveal(), "ya29.THIRD", "a 401 refresh runs it once more");
  equal(f.calls.length, 3);
});

Deno.test("VertexTokens refuses empty, failing, multi-word or slow answers without quoting them", async () => {
  const CASES = [
    { out: "  \n", why: "printed nothing" },
    { code: 1, out: "ya29.LEAKED", why: "exited with code 1" },
    { out: "ya29.LEAKED second", why: "more than one printable word" },
    { timedOut: true, out: "ya29.LEAKED", why: "no answer within" },
  ];
  for (const c of CASES) {
    const t = new VertexTokens({ run: fakeRun([c]).run });
    await rejects(t.get(CONFIG), (e: unknown) => {
      ok(e instanceof IsbError && e.message.includes(c.why), String(e));
      ok(!(e as Error).message.includes("LEAKED"));
      return true;
    });
  }
});

Deno.test("runCommand runs argv without a shell and bounds its output", async () => {
  const deno = Deno.execPath();
  const ok1 = await runCommand([deno, "eval", "console.log('tok$(id)')"], {
    timeoutMs: 10_000,
    maxBytes: 1024,
  });
  equal(ok1.code, 0);
  equal(new TextDecoder().decode(ok1.stdout).trim(), "tok$(id)");
  const big = await runCommand([deno, "eval", "console.log('x'.repeat(5000))"], {
    timeoutMs: 10_000,
    maxBytes: 1024,
  });
  ok(big.tooLong);
  const slow = await runCommand([deno, "eval", "await new Promise((r) => setTimeout(r, 20000))"], {
    timeoutMs: 300,
    maxBytes: 1024,
  });
  ok(slow.timedOut);
  const missing = new VertexTokens();
  await rejects(
    missing.get({ ...CONFIG, tokenCommand: ["/nonexistent/gcloud-isx-test"] }),
    /command not found/,
  );
});
