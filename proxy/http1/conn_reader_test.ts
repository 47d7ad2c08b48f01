import { deepStrictEqual, equal } from "node:assert/strict";
import { ConnReader } from "./conn_reader.ts";

const enc = new TextEncoder();

/** A connection that gives `chunks` one per read, then stalls (or ends with `end`). */
function fakeConn(chunks: Uint8Array[], end = false): Deno.Conn {
  let stall: (() => void) | undefined;
  return {
    read(p: Uint8Array): Promise<number | null> {
      const c = chunks.shift();
      if (!c) {
        if (end) return Promise.resolve(null);
        return new Promise((resolve) => (stall = () => resolve(null)));
      }
      p.set(c.subarray(0, p.length));
      if (c.length > p.length) chunks.unshift(c.subarray(p.length));
      return Promise.resolve(Math.min(c.length, p.length));
    },
    close() {
      stall?.();
    },
  } as unknown as Deno.Conn;
}

Deno.test("ConnReader holds only its first buffer for a head that stalls (slowloris)", async () => {
  const conn = fakeConn([enc.encode("GET / HTTP/1.1\r\nx: ")]);
  const r = new ConnReader(conn);
  const head = r.head();
  await new Promise((res) => setTimeout(res, 0));
  equal(r.capacity, 4096, "a few bytes of head hold 4 KiB, not 64");
  conn.close();
  deepStrictEqual(await head, { end: true });
});

Deno.test("ConnReader grows to its cap for a large head, and says tooLarge past it", async () => {
  const big = `GET / HTTP/1.1\r\nx: ${"a".repeat(20_000)}\r\n\r\n`;
  const r = new ConnReader(fakeConn([enc.encode(big)], true));
  deepStrictEqual(await r.head(), { text: big });
  equal(r.capacity, 64 * 1024);
  const over = new ConnReader(fakeConn([enc.encode(`GET / HTTP/1.1\r\nx: ${"a".repeat(70_000)}`)]));
  deepStrictEqual(await over.head(), { tooLarge: true });
  equal(over.capacity, 64 * 1024, "never more than the cap");
});

Deno.test("ConnReader grows for a body read and consumed a full buffer at a time", async () => {
  const body = new Uint8Array(200_000);
  const r = new ConnReader(fakeConn([body], true));
  const sizes: number[] = [];
  while (await r.fill()) {
    sizes.push(r.buffered);
    r.consume(r.buffered);
  }
  deepStrictEqual(sizes.slice(0, 3), [4096, 16384, 65536], "each full read makes the next larger");
  equal(sizes.reduce((a, b) => a + b, 0), body.length);
  equal(r.capacity, 64 * 1024, "never more than the cap");
});

Deno.test("ConnReader stays at its first buffer while reads leave room", async () => {
  const r = new ConnReader(
    fakeConn([enc.encode("a".repeat(1000)), enc.encode("b".repeat(1000))], true),
  );
  while (await r.fill()) r.consume(r.buffered);
  equal(r.capacity, 4096);
});
