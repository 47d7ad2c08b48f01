import assert from "node:assert/strict";
import { WsClient } from "./websocket.ts";
import { outputStream } from "./_exec_streams.ts";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * An exec output socket's peer on a unix socket, written by hand so that it can also reset
 * the connection: it sends three binary chunks at once, then on a client frame "end" closes
 * with a close frame, or on "drop" resets the connection without one, as incusd's side
 * goes away when an instance stops.
 */
async function outputServer() {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/ws.socket`;
  const listener = Deno.listen({ path, transport: "unix" });
  const served = (async () => {
    const conn = await listener.accept();
    const b = new Uint8Array(4096);
    let head = "";
    while (!head.includes("\r\n\r\n")) {
      const n = await conn.read(b);
      if (n === null) return conn.close();
      head += new TextDecoder().decode(b.subarray(0, n));
    }
    const key = /sec-websocket-key:\s*(\S+)/i.exec(head)![1]!;
    const sha = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(key + GUID));
    const accept = btoa(String.fromCharCode(...new Uint8Array(sha)));
    await conn.write(new TextEncoder().encode(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    ));
    for (let i = 0; i < 3; i++) await conn.write(new Uint8Array([0x82, 3, i, i, i]));
    const n = (await conn.read(b)) ?? 0; // one small masked text frame from the client
    const len = b[1]! & 127;
    const word = new TextDecoder().decode(
      b.subarray(6, Math.min(n, 6 + len)).map((x, i) => x ^ b[2 + (i & 3)]!),
    );
    if (word === "end") {
      await conn.write(new Uint8Array([0x88, 2, 0x03, 0xe8]));
      await conn.read(b).catch(() => null); // the client's close answer
    }
    conn.close();
  })();
  return {
    path,
    async [Symbol.asyncDispose]() {
      listener.close();
      await served.catch(() => {});
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Rejections nobody handled while `fn` ran (and a moment after). */
async function unhandledDuring(fn: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const on = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    seen.push(e.reason);
  };
  globalThis.addEventListener("unhandledrejection", on);
  try {
    await fn();
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    globalThis.removeEventListener("unhandledrejection", on);
  }
  return seen;
}

for (const how of ["end", "drop"] as const) {
  Deno.test(`an output stream its reader abandoned ends quietly when the socket closes (${how})`, async () => {
    await using srv = await outputServer();
    const ws = new WsClient();
    const closed = new Promise<void>((r) => ws.on("close", () => r()));
    const stream = outputStream(ws); // before connect, as execStart does
    await ws.connect({ socket: srv.path }, "/exec");
    const seen = await unhandledDuring(async () => {
      // a pump whose consumer failed (an isb rpc client gone): the loop throws, so the
      // stream is cancelled while its socket is still open
      await assert.rejects(async () => {
        for await (const _ of stream) throw new Error("client gone");
      }, /client gone/);
      await ws.send(how, false);
      await closed;
    });
    assert.deepEqual(seen.map(String), []);
  });
}

Deno.test("an output stream read to its end gets every chunk, then ends at the close", async () => {
  await using srv = await outputServer();
  const ws = new WsClient();
  const stream = outputStream(ws);
  await ws.connect({ socket: srv.path }, "/exec");
  const got: number[] = [];
  const seen = await unhandledDuring(async () => {
    for await (const c of stream) {
      got.push(c[0]!);
      if (got.length === 3) await ws.send("end", false);
    }
  });
  assert.deepEqual(got, [0, 1, 2]);
  assert.deepEqual(seen, []);
});
