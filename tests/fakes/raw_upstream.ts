/**
 * A scripted plain-HTTP/1.1 upstream on a raw socket, for the relay's framing tests: it
 * records every request (head, de-chunked body, which connection it came on) and answers
 * with exactly the bytes a test gives, so chunk extensions, trailers, close-delimited
 * bodies, interim responses and misbehaving servers can all be staged. A request head
 * with `expect: 100-continue` is answered `100 Continue` before its body is read.
 * Plus {@link RawClient}, the guest side: one TLS connection, one response at a time.
 *
 * @module
 */

const enc = new TextEncoder();
const dec = new TextDecoder();

/** One request the fake read. */
export interface RawRequest {
  head: string;
  body: string;
  /** 1 for the first connection accepted, 2 for the second, … */
  connection: number;
}

/** What the fake answers: parts written one by one; `close` ends the connection after. */
export interface RawReply {
  parts: (string | Uint8Array)[];
  close?: boolean;
}

/** A running raw upstream. */
export interface RawUpstream {
  port: number;
  origin: string;
  requests: RawRequest[];
  /** Every request head as soon as it arrived, before its body (a bad body included). */
  heads: string[];
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

class Bytes {
  buf = new Uint8Array(0);
  constructor(readonly conn: Deno.Conn) {}
  async more(): Promise<boolean> {
    const chunk = new Uint8Array(65536);
    const n = await this.conn.read(chunk).catch(() => null);
    if (n === null) return false;
    const next = new Uint8Array(this.buf.length + n);
    next.set(this.buf);
    next.set(chunk.subarray(0, n), this.buf.length);
    this.buf = next;
    return true;
  }
  take(n: number): Uint8Array {
    const out = this.buf.slice(0, n);
    this.buf = this.buf.slice(n);
    return out;
  }
  text(): string {
    return dec.decode(this.buf);
  }
}

async function readBody(b: Bytes, head: string): Promise<string | undefined> {
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (length) {
    while (b.buf.length < Number(length[1])) if (!(await b.more())) return undefined;
    return dec.decode(b.take(Number(length[1])));
  }
  if (!/\r\ntransfer-encoding: *chunked/i.test(head)) return "";
  let body = "";
  for (;;) {
    while (!b.text().includes("\r\n")) if (!(await b.more())) return undefined;
    const line = b.text().slice(0, b.text().indexOf("\r\n"));
    const size = parseInt(line, 16);
    const need = line.length + 2 + size + 2;
    while (b.buf.length < need) if (!(await b.more())) return undefined;
    b.take(line.length + 2);
    body += dec.decode(b.take(size));
    b.take(2);
    if (size === 0) return body;
  }
}

/** Starts the fake on 127.0.0.1; `respond` scripts each answer. */
export function startRawUpstream(respond: (req: RawRequest) => RawReply): RawUpstream {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const requests: RawRequest[] = [];
  const heads: string[] = [];
  const conns = new Set<Deno.Conn>();
  let connections = 0;
  const serve = async (conn: Deno.Conn, id: number) => {
    const b = new Bytes(conn);
    try {
      for (;;) {
        while (!b.text().includes("\r\n\r\n")) if (!(await b.more())) return;
        const at = b.text().indexOf("\r\n\r\n") + 4;
        const head = dec.decode(b.take(enc.encode(b.text().slice(0, at)).length));
        heads.push(head);
        if (/\r\nexpect: *100-continue/i.test(head)) {
          await conn.write(enc.encode("HTTP/1.1 100 Continue\r\n\r\n"));
        }
        const body = await readBody(b, head);
        if (body === undefined) return;
        const req = { head, body, connection: id };
        requests.push(req);
        const reply = respond(req);
        for (const p of reply.parts) {
          await conn.write(typeof p === "string" ? enc.encode(p) : p);
          await new Promise((r) => setTimeout(r, 2));
        }
        if (reply.close) return;
      }
    } catch {
      /* the proxy went away */
    } finally {
      conns.delete(conn);
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  };
  const running = new Set<Promise<void>>();
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      const p = serve(conn, ++connections).finally(() => running.delete(p));
      running.add(p);
    }
  })().catch(() => {});
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    port,
    origin: `http://127.0.0.1:${port}`,
    requests,
    heads,
    get connections() {
      return connections;
    },
    async close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      await accepting;
      await Promise.all(running);
    },
  };
}

/** One parsed response. */
export interface RawAnswer {
  status: number;
  head: string;
  body: string;
}

/** The guest side: reads one response at a time from a connection, by its framing. */
export class RawClient {
  readonly #b: Bytes;
  constructor(readonly conn: Deno.Conn) {
    this.#b = new Bytes(conn);
  }

  /** Writes raw request bytes. */
  async send(text: string): Promise<void> {
    const bytes = enc.encode(text);
    for (let off = 0; off < bytes.length;) off += await this.conn.write(bytes.subarray(off));
  }

  /** Reads the next response (interim 1xx responses included, each on its own). */
  async read(): Promise<RawAnswer | undefined> {
    const b = this.#b;
    while (!b.text().includes("\r\n\r\n")) if (!(await b.more())) return undefined;
    const at = b.text().indexOf("\r\n\r\n") + 4;
    const head = dec.decode(b.take(enc.encode(b.text().slice(0, at)).length));
    const status = Number(head.split(" ")[1]);
    if (status < 200 || /^HEAD /.test(head)) return { status, head, body: "" };
    const body = /\r\n(content-length|transfer-encoding):/i.test(head)
      ? await readBody(b, head)
      : await (async () => {
        while (await b.more()) { /* until close */ }
        return dec.decode(b.take(b.buf.length));
      })();
    return { status, head, body: body ?? "<truncated>" };
  }

  /** True once the proxy closed the connection. */
  async closed(): Promise<boolean> {
    return !(await this.#b.more()) && this.#b.buf.length === 0;
  }
}
