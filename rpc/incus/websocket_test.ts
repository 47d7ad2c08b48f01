import assert from "node:assert/strict";
import { CLOSED, WsClient } from "./websocket.ts";
import { IsbError } from "../errors.ts";

/** A websocket echo server on a unix socket (Deno's own implementation as the peer). */
async function echoServer() {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/ws.socket`;
  const server = Deno.serve({ path, transport: "unix", onListen() {} }, (req) => {
    if (new URL(req.url).pathname === "/nope") return new Response("no", { status: 404 });
    const { socket, response } = Deno.upgradeWebSocket(req);
    socket.binaryType = "arraybuffer";
    socket.onmessage = (e) => {
      if (e.data === "bye") return socket.close(4001, "bye");
      socket.send(e.data);
    };
    return response;
  });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

function nextMessage(ws: WsClient): Promise<{ data: Uint8Array; binary: boolean }> {
  return new Promise((resolve) => ws.on("message", (data, binary) => resolve({ data, binary })));
}

Deno.test("WsClient.send round-trips text and binary frames of every length class", async () => {
  await using srv = await echoServer();
  const ws = new WsClient();
  const closed = new Promise<number>((r) => ws.on("close", r));
  await ws.connect({ socket: srv.path }, "/echo");
  for (const n of [0, 5, 125, 126, 65535, 65536, 300_000]) {
    const data = crypto.getRandomValues(new Uint8Array(Math.min(n, 65536)));
    const big = new Uint8Array(n);
    for (let off = 0; off < n; off += data.length || 1) big.set(data.subarray(0, n - off), off);
    const got = nextMessage(ws);
    await ws.send(big, true);
    const m = await got;
    assert.equal(m.binary, true);
    assert.deepEqual(m.data, big);
  }
  const text = nextMessage(ws);
  await ws.send("héllo", false);
  assert.deepEqual(await text, { data: new TextEncoder().encode("héllo"), binary: false });
  await ws.send("bye", false);
  assert.equal(await closed, 4001);
  assert.equal(ws.readyState, CLOSED);
});

Deno.test("WsClient.close ends the connection with a close handshake", async () => {
  await using srv = await echoServer();
  const ws = new WsClient();
  const closed = new Promise<number>((r) => ws.on("close", r));
  await ws.connect({ socket: srv.path }, "/echo");
  ws.close(1000);
  assert.equal(await closed, 1000);
  await assert.rejects(ws.send("x", false), IsbError);
});

Deno.test("WsClient.pause holds messages back until resume", async () => {
  await using srv = await echoServer();
  const ws = new WsClient();
  const seen: string[] = [];
  ws.on("message", (d) => seen.push(new TextDecoder().decode(d)));
  const closed = new Promise<number>((r) => ws.on("close", r));
  await ws.connect({ socket: srv.path }, "/echo");
  await ws.send("a", false);
  await new Promise<void>((r) => ws.on("message", () => r()));
  ws.pause();
  await ws.send("b", false);
  await ws.send("c", false);
  await new Promise((r) => setTimeout(r, 50)); // give a wrongly unpaused reader time to misbehave
  assert.deepEqual(seen, ["a"]);
  ws.resume();
  await ws.send("bye", false);
  await closed;
  assert.deepEqual(seen, ["a", "b", "c"]);
});

Deno.test("WsClient.connect answers websocket with the status when the upgrade is refused", async () => {
  await using srv = await echoServer();
  const ws = new WsClient();
  const e = await ws.connect({ socket: srv.path }, "/nope?secret=s3cret").then(() => 0, (e) => e);
  ws.terminate();
  assert.ok(e instanceof IsbError);
  assert.equal(e.code, "websocket");
  assert.equal(e.message, "open websocket /nope: HTTP 404");
});

Deno.test("WsClient.connect on a missing socket fails with NotFound", async () => {
  const ws = new WsClient();
  await assert.rejects(
    ws.connect({ socket: "/nonexistent/ws.socket" }, "/x"),
    Deno.errors.NotFound,
  );
});
