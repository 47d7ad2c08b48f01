import { deepStrictEqual as assertEquals, equal, ok } from "node:assert/strict";
import { ChunkedDecoder } from "../http1/chunked.ts";
import { ConnReader } from "../http1/conn_reader.ts";
import { ActivityCounter } from "../activity/counter.ts";
import type { Framing } from "../http1/http1.ts";
import { BodyWriter, pumpRequest, pumpResponse } from "./_body.ts";
import { Scrubber } from "./scrub.ts";
import { Secret } from "../config/secret.ts";
import { UsageReader } from "../activity/usage.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const REAL = "sk-ant-api03-REAL-body-42";

/** A connection that reads back scripted pieces and records what is written to it. */
class FakeConn {
  readonly written: number[] = [];
  readonly #pieces: Uint8Array[];
  constructor(pieces: Uint8Array[] = []) {
    this.#pieces = pieces.filter((p) => p.length > 0).map((p) => p.slice());
  }
  read(p: Uint8Array): Promise<number | null> {
    const next = this.#pieces[0];
    if (!next) return Promise.resolve(null);
    const n = Math.min(p.length, next.length);
    p.set(next.subarray(0, n));
    if (n === next.length) this.#pieces.shift();
    else this.#pieces[0] = next.subarray(n);
    return Promise.resolve(n);
  }
  write(p: Uint8Array): Promise<number> {
    this.written.push(...p);
    return Promise.resolve(p.length);
  }
  get conn(): Deno.Conn {
    return this as unknown as Deno.Conn;
  }
}

function cuts(bytes: Uint8Array): Uint8Array[][] {
  const out: Uint8Array[][] = [];
  for (let i = 0; i <= bytes.length; i++) {
    for (let j = i; j <= bytes.length; j += 3) {
      out.push([bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)]);
    }
  }
  return out;
}

function unchunk(bytes: Uint8Array): string {
  const d = new ChunkedDecoder();
  const out: number[] = [];
  let pos = 0;
  while (!d.done) {
    pos = d.step(bytes, pos, bytes.length);
    if (pos < 0) throw new TypeError(`bad chunked output: ${d.error}`);
    out.push(...bytes.subarray(d.segStart, d.segEnd));
    if (pos === bytes.length && !d.done) throw new TypeError("unfinished chunked output");
  }
  equal(pos, bytes.length, "nothing after the last chunk");
  return dec.decode(new Uint8Array(out));
}

async function relay(pieces: Uint8Array[], framing: Framing, chunked: boolean) {
  const up = new FakeConn(pieces);
  const guest = new FakeConn();
  const counter = new ActivityCounter({ now: () => 0, providers: ["anthropic"] });
  const traffic = counter.traffic({ name: "i", incarnation: "1", view: 1 });
  const reader = new UsageReader("anthropic", "sse");
  const w = new BodyWriter();
  w.begin(
    { guest: guest.conn, scrub: Scrubber.of([new Secret(REAL)]), reader, traffic, chunked },
    enc.encode("HEAD\r\n\r\n"),
  );
  const complete = await pumpResponse(new ConnReader(up.conn, 64), framing, w);
  const out = new Uint8Array(guest.written);
  const received = counter.snapshot().instances.i!.traffic_bytes_received;
  return { complete, out, usage: reader.finish(), received };
}

const SSE = `event: message_start\ndata: {"type":"message_start","message":{"usage":` +
  `{"input_tokens":5,"output_tokens":1}}}\n\ndata: {"text":"${REAL}"}\n\n` +
  `data: {"type":"message_delta","usage":{"output_tokens":9}}\n\n`;
const MASKED = SSE.replace(REAL, "*".repeat(REAL.length));

Deno.test("pumpResponse re-chunks a chunked body, masked and read, identically at every cut", async () => {
  const at = SSE.indexOf(REAL) + 7;
  const body = enc.encode(
    `${at.toString(16)};x=1\r\n${SSE.slice(0, at)}\r\n` +
      `${(SSE.length - at).toString(16)}\r\n${SSE.slice(at)}\r\n0\r\nt: 1\r\n\r\n`,
  );
  for (const pieces of cuts(body)) {
    const r = await relay(pieces, { kind: "chunked" }, true);
    ok(r.complete);
    equal(dec.decode(r.out.subarray(0, 8)), "HEAD\r\n\r\n");
    equal(unchunk(r.out.subarray(8)), MASKED);
    equal(r.received, r.out.length);
    assertEquals([r.usage.input_tokens, r.usage.output_tokens], [5, 9]);
  }
});

Deno.test("pumpResponse relays a content-length body in place identically at every cut", async () => {
  const body = enc.encode(SSE);
  for (const pieces of cuts(body)) {
    const r = await relay(pieces, { kind: "length", length: body.length }, false);
    ok(r.complete);
    equal(dec.decode(r.out), "HEAD\r\n\r\n" + MASKED);
    assertEquals([r.usage.input_tokens, r.usage.output_tokens], [5, 9]);
  }
});

Deno.test("pumpResponse reports a short body and never sends its held tail", async () => {
  const text = `data: ${REAL.slice(0, 10)}`;
  const r = await relay([enc.encode(text)], { kind: "length", length: 100 }, false);
  ok(!r.complete);
  equal(dec.decode(r.out), "HEAD\r\n\r\ndata: ");
});

Deno.test("pumpResponse chunks a body that runs to the connection's close", async () => {
  const r = await relay([enc.encode(SSE.slice(0, 50)), enc.encode(SSE.slice(50))], {
    kind: "close",
  }, true);
  ok(r.complete);
  equal(unchunk(r.out.subarray(8)), MASKED);
});

Deno.test("pumpRequest forwards a chunked body as it came and stops at its end at every cut", async () => {
  const body = "4;e=1\r\nabcd\r\n2\r\nef\r\n0\r\nx: y\r\n\r\n";
  const next = "GET / HTTP/1.1\r\n\r\n";
  for (const pieces of cuts(enc.encode(body + next))) {
    const guest = new ConnReader(new FakeConn(pieces).conn, 64);
    const up = new FakeConn();
    let sent = 0;
    const ok1 = await pumpRequest(guest, up.conn, {
      framing: { kind: "chunked" },
      head: enc.encode("H\r\n\r\n"),
      sent: (n) => (sent += n),
    });
    ok(ok1);
    equal(dec.decode(new Uint8Array(up.written)), "H\r\n\r\n" + body);
    equal(sent, body.length);
    let rest = dec.decode(guest.view());
    guest.consume(guest.buffered);
    while (await guest.fill()) {
      rest += dec.decode(guest.view());
      guest.consume(guest.buffered);
    }
    equal(rest, next);
  }
});

Deno.test("pumpRequest says so when the guest stops mid-body", async () => {
  const guest = new ConnReader(new FakeConn([enc.encode("abc")]).conn, 64);
  const up = new FakeConn();
  const done = await pumpRequest(guest, up.conn, {
    framing: { kind: "length", length: 10 },
    head: enc.encode("H"),
    sent: () => {},
  });
  ok(!done);
  equal(dec.decode(new Uint8Array(up.written)), "Habc");
});
