import assert from "node:assert/strict";
import { Bridge } from "./_bridge.ts";
import type { ChildSpec, McpChild } from "./_child.ts";

type Json = Record<string, unknown>;

/** A stand-in for isx mcp's stdio side: records what it gets, answers as told. */
class FakeChild implements McpChild {
  static made: FakeChild[] = [];
  readonly pid: number;
  readonly got: Json[] = [];
  stops = 0;
  #end!: () => void;
  readonly exited: Promise<void> = new Promise((r) => (this.#end = r));
  readonly out: (msg: Json) => void;

  constructor(out: (msg: Json) => void) {
    this.out = out;
    this.pid = 1000 + FakeChild.made.length;
    FakeChild.made.push(this);
  }

  send(msg: Json): Promise<void> {
    this.got.push(msg);
    // answers every request at once unless it is a slow tool call or a listen
    const method = msg.method as string | undefined;
    if (msg.id !== undefined && method !== "slow" && method !== "subscriptions/listen") {
      queueMicrotask(() => this.out({ jsonrpc: "2.0", id: msg.id, result: { echo: method } }));
    }
    return Promise.resolve();
  }

  stop(): Promise<void> {
    this.stops++;
    this.#end();
    return this.exited;
  }
}

const spec: ChildSpec = { command: "none", args: () => [], env: {} };

function bridge(keepAliveMs = 60_000): Bridge {
  FakeChild.made = [];
  return new Bridge("coord", "0".repeat(32), {
    spec,
    spawn: (_s, _n, onMessage) => new FakeChild(onMessage),
    keepAliveMs,
  });
}

function post(body: unknown, headers: Record<string, string> = {}): Request {
  return new Request("https://mcp.isx.internal/mcp", {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
  });
}

const init = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25" },
};

async function events(res: Response, n: number): Promise<Json[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const out: Json[] = [];
  while (out.length < n) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
    let at;
    while ((at = text.indexOf("\n\n")) >= 0) {
      const block = text.slice(0, at);
      text = text.slice(at + 2);
      const data = block.split("\n").find((l) => l.startsWith("data: "));
      if (data) out.push(JSON.parse(data.slice(6)));
      else out.push({ comment: block });
    }
  }
  await reader.cancel();
  return out;
}

Deno.test("Bridge: initialize starts a child and a session; requests carry its id, others get 404", async () => {
  const b = bridge();
  try {
    const r = await b.handle(post(init));
    assert.equal(r.status, 200);
    const sid = r.headers.get("mcp-session-id")!;
    assert.match(sid, /^[0-9a-f-]{36}$/);
    assert.deepEqual(await r.json(), { jsonrpc: "2.0", id: 1, result: { echo: "initialize" } });
    const ok = await b.handle(
      post({ jsonrpc: "2.0", id: 7, method: "tools/list" }, { "mcp-session-id": sid }),
    );
    assert.deepEqual(await ok.json(), { jsonrpc: "2.0", id: 7, result: { echo: "tools/list" } });
    // the child saw its own ids, never the client's
    assert.deepEqual(FakeChild.made[0]!.got.map((m) => m.id), [1, 2]);
    const bad = await b.handle(
      post({ jsonrpc: "2.0", id: 8, method: "ping" }, { "mcp-session-id": "nope" }),
    );
    assert.equal(bad.status, 404);
    assert.match(await bad.text(), /initialize again/);
    const note = await b.handle(
      post({ jsonrpc: "2.0", method: "notifications/initialized" }, { "mcp-session-id": sid }),
    );
    assert.equal(note.status, 202);
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: a new initialize ends the previous child and its session", async () => {
  const b = bridge();
  try {
    const first = await b.handle(post(init));
    const sid = first.headers.get("mcp-session-id")!;
    await first.body?.cancel();
    const second = await b.handle(post(init));
    await second.body?.cancel();
    assert.equal(FakeChild.made.length, 2);
    assert.equal(FakeChild.made[0]!.stops, 1);
    assert.equal(FakeChild.made[1]!.stops, 0);
    const old = await b.handle(
      post({ jsonrpc: "2.0", id: 2, method: "ping" }, { "mcp-session-id": sid }),
    );
    assert.equal(old.status, 404);
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: DELETE ends the session; GET needs it and streams notifications with keep-alives", async () => {
  const b = bridge(20);
  try {
    const r = await b.handle(post(init));
    const sid = r.headers.get("mcp-session-id")!;
    await r.body?.cancel();
    const noSession = await b.handle(
      new Request("https://mcp.isx.internal/mcp", { headers: { accept: "text/event-stream" } }),
    );
    assert.equal(noSession.status, 405);
    await noSession.body?.cancel();
    const get = await b.handle(
      new Request("https://mcp.isx.internal/mcp", {
        headers: { accept: "text/event-stream", "mcp-session-id": sid },
      }),
    );
    assert.equal(get.headers.get("content-type"), "text/event-stream");
    const change = {
      jsonrpc: "2.0",
      method: "notifications/isx/task_changed",
      params: { task_id: "t1" },
    };
    setTimeout(() => FakeChild.made[0]!.out(change), 50);
    const got = await events(get, 3);
    assert.ok(got.some((e) => e.comment === ": keep-alive"), JSON.stringify(got));
    assert.ok(got.some((e) => e.method === "notifications/isx/task_changed"), JSON.stringify(got));
    const del = await b.handle(
      new Request("https://mcp.isx.internal/mcp", {
        method: "DELETE",
        headers: { "mcp-session-id": sid },
      }),
    );
    assert.equal(del.status, 204);
    assert.equal(FakeChild.made[0]!.stops, 1);
    const after = await b.handle(
      post({ jsonrpc: "2.0", id: 3, method: "ping" }, { "mcp-session-id": sid }),
    );
    assert.equal(after.status, 404);
    await after.body?.cancel();
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: an event-stream POST carries its progress, then the answer, under the client's id", async () => {
  const b = bridge();
  try {
    const r = await b.handle(post(init));
    const sid = r.headers.get("mcp-session-id")!;
    await r.body?.cancel();
    const call = {
      jsonrpc: "2.0",
      id: "c1",
      method: "slow",
      params: { _meta: { progressToken: "tok" } },
    };
    const res = await b.handle(
      post(call, { "mcp-session-id": sid, accept: "application/json, text/event-stream" }),
    );
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const child = FakeChild.made[0]!;
    const id = child.got.at(-1)!.id;
    assert.equal(typeof id, "number");
    child.out({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: "tok", progress: 1 },
    });
    child.out({ jsonrpc: "2.0", id, result: { done: true } });
    const got = await events(res, 2);
    assert.equal(got[0]!.method, "notifications/progress");
    assert.deepEqual(got[1], { jsonrpc: "2.0", id: "c1", result: { done: true } });
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: stateless POSTs start the child without initialize; subscriptions/listen streams until cancelled", async () => {
  const b = bridge();
  try {
    const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28" };
    const d = await b.handle(
      post({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta } }),
    );
    assert.equal(d.status, 200);
    assert.equal(d.headers.get("mcp-session-id"), null);
    assert.deepEqual((await d.json()).result, { echo: "server/discover" });
    const json = await b.handle(
      post({ jsonrpc: "2.0", id: 2, method: "subscriptions/listen", params: {} }),
    );
    assert.equal(json.status, 406);
    await json.body?.cancel();
    const listen = await b.handle(
      post({ jsonrpc: "2.0", id: "L", method: "subscriptions/listen", params: { _meta: meta } }, {
        accept: "text/event-stream",
      }),
    );
    const child = FakeChild.made[0]!;
    const sub = child.got.at(-1)!.id as number;
    child.out({
      jsonrpc: "2.0",
      method: "notifications/isx/task_changed",
      params: { task_id: "t1", _meta: { "io.modelcontextprotocol/subscriptionId": sub } },
    });
    const cancel = await b.handle(
      post({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: "L" } }),
    );
    assert.equal(cancel.status, 202);
    const got = await events(listen, 2);
    assert.equal(got.length, 1);
    assert.equal(
      (got[0]!.params as Json & { _meta: Json })._meta["io.modelcontextprotocol/subscriptionId"],
      "L",
    );
    // the child got the cancellation under its own id
    assert.deepEqual(child.got.at(-1)!.params, { requestId: sub });
    assert.equal(FakeChild.made.length, 1);
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: a child that ends fails its calls and its session (404: initialize again)", async () => {
  const b = bridge();
  try {
    const r = await b.handle(post(init));
    const sid = r.headers.get("mcp-session-id")!;
    await r.body?.cancel();
    const res = await b.handle(
      post({ jsonrpc: "2.0", id: 5, method: "slow" }, { "mcp-session-id": sid }),
    );
    await FakeChild.made[0]!.stop();
    const body = await res.json();
    assert.equal(body.id, 5);
    assert.equal(body.error.code, -32603);
    await new Promise((r) => setTimeout(r, 0));
    const again = await b.handle(
      post({ jsonrpc: "2.0", id: 6, method: "ping" }, { "mcp-session-id": sid }),
    );
    assert.equal(again.status, 404);
    await again.body?.cancel();
  } finally {
    await b.close();
  }
});

Deno.test("Bridge: bodies that are not one JSON-RPC object get 400", async () => {
  const b = bridge();
  try {
    for (const body of ["{", "[1]", "3"]) {
      const r = await b.handle(
        new Request("https://mcp.isx.internal/mcp", { method: "POST", body }),
      );
      assert.equal(r.status, 400, body);
      await r.body?.cancel();
    }
    assert.equal(FakeChild.made.length, 0);
  } finally {
    await b.close();
  }
});
