import assert from "node:assert/strict";
import { catalogTools } from "../tools/catalog.ts";
import { serveMcp } from "./mod.ts";
import type { McpBackend } from "./types.ts";

/** A server on in-memory streams whose backend loader only counts and fails. */
function harness(idleLoadMs: number) {
  let push!: (line: string) => void;
  let endInput!: () => void;
  const input = new ReadableStream<Uint8Array>({
    start(c) {
      push = (line) => c.enqueue(new TextEncoder().encode(line + "\n"));
      endInput = () => c.close();
    },
  });
  const got: Record<string, unknown>[] = [];
  let waiter: (() => void) | undefined;
  let text = "";
  const output = new WritableStream<Uint8Array>({
    write(chunk) {
      text += new TextDecoder().decode(chunk);
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n")) {
        got.push(JSON.parse(text.slice(0, nl)));
        text = text.slice(nl + 1);
      }
      waiter?.();
    },
  });
  const loads = { count: 0 };
  const server = serveMcp({
    input,
    output,
    idleLoadMs,
    backend: (): Promise<McpBackend> => {
      loads.count++;
      return Promise.reject(new Error("the backend is not there in this test"));
    },
  });
  const send = (id: number, method: string, params: Record<string, unknown> = {}) =>
    push(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
  async function answer(id: number): Promise<Record<string, unknown>> {
    for (;;) {
      const m = got.find((x) => x.id === id);
      if (m) return m;
      await new Promise<void>((r) => waiter = r);
    }
  }
  return { send, answer, loads, endInput, server };
}

const INIT = {
  protocolVersion: "2025-11-25",
  capabilities: { experimental: { "isx/task_changed": {} } },
  clientInfo: { name: "t" },
};

Deno.test("serveMcp answers the handshake, ping, tools/list and prompts without its backend", async () => {
  const h = harness(60_000);
  h.send(1, "initialize", INIT);
  assert.equal(
    ((await h.answer(1)).result as { protocolVersion: string }).protocolVersion,
    "2025-11-25",
  );
  h.send(2, "ping");
  h.send(3, "tools/list");
  h.send(4, "prompts/list");
  await h.answer(2);
  const tools = (await h.answer(3)).result as { tools: unknown[] };
  assert.deepEqual(tools.tools, catalogTools());
  assert.equal(tools.tools.length, 17);
  await h.answer(4);
  assert.equal(h.loads.count, 0); // none of these loaded the session or the tool table
  h.endInput();
  await h.server.finished; // a started session's backend is loaded at the end, to release it
  assert.equal(h.loads.count, 1);
});

Deno.test("serveMcp loads its backend on the first tools/call and answers a failure", async () => {
  const h = harness(60_000);
  h.send(1, "tools/call", { name: "list_templates", arguments: {} });
  const a = await h.answer(1);
  assert.deepEqual(a.error, {
    code: -32603,
    message: "internal error: the backend is not there in this test",
  });
  h.send(2, "tasks/list");
  assert.equal(((await h.answer(2)).error as { code: number }).code, -32603);
  assert.equal(h.loads.count, 1); // loaded once, for both
  h.endInput();
  await h.server.finished;
  assert.equal(h.loads.count, 1);
});

Deno.test("serveMcp loads its backend once the client pauses after the handshake", async () => {
  const h = harness(0);
  h.send(1, "initialize", INIT);
  await h.answer(1);
  for (let i = 0; i < 50 && h.loads.count === 0; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(h.loads.count, 1);
  h.endInput();
  await h.server.finished;
  assert.equal(h.loads.count, 1);
});
