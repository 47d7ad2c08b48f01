import assert from "node:assert/strict";
import { IsbError } from "../errors.ts";
import { encodeRequest, readResponse } from "./http_unix.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A reader that hands out `data` in the given pieces. */
function pieces(data: Uint8Array, cuts: number[]) {
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const c of [...cuts, data.length]) {
    parts.push(data.subarray(at, c));
    at = c;
  }
  return {
    read(p: Uint8Array): Promise<number | null> {
      while (parts.length && parts[0]!.length === 0) parts.shift();
      const next = parts[0];
      if (!next) return Promise.resolve(null);
      const n = Math.min(p.length, next.length);
      p.set(next.subarray(0, n));
      parts[0] = next.subarray(n);
      return Promise.resolve(n);
    },
  };
}

const CHUNKED = enc.encode(
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
    '5\r\n{"a":\r\n3;ext=1\r\n12}\r\n0\r\n\r\n',
);

Deno.test("readResponse decodes a chunked body at every cut", async () => {
  for (let i = 0; i <= CHUNKED.length; i++) {
    for (const j of [i, Math.min(CHUNKED.length, i + 1), Math.min(CHUNKED.length, i + 7)]) {
      const r = await readResponse(pieces(CHUNKED, [i, j]));
      assert.equal(r.status, 200, `cut ${i},${j}`);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.equal(dec.decode(r.body), '{"a":12}', `cut ${i},${j}`);
    }
  }
});

Deno.test("readResponse reads a content-length body and a body that runs to the end", async () => {
  const big = "x".repeat(300_000);
  const cl = enc.encode(`HTTP/1.1 201 Created\r\nContent-Length: ${big.length}\r\n\r\n${big}`);
  const r = await readResponse(pieces(cl, [10, 70_000, 140_000]));
  assert.equal(r.status, 201);
  assert.equal(r.body.length, big.length);
  const eof = enc.encode("HTTP/1.0 200 OK\r\n\r\nuntil the end");
  assert.equal(dec.decode((await readResponse(pieces(eof, [3]))).body), "until the end");
  const none = enc.encode("HTTP/1.1 204 No Content\r\n\r\n");
  assert.equal((await readResponse(pieces(none, []))).body.length, 0);
});

Deno.test("readResponse refuses what is not HTTP and reports a connection that ends early", async () => {
  const code = async (text: string) => {
    const e = await readResponse(pieces(enc.encode(text), [])).then(
      () => assert.fail("no error"),
      (e) => e,
    );
    assert.ok(e instanceof IsbError, String(e));
    return [e.code, e.message];
  };
  assert.equal((await code("SSH-2.0-OpenSSH\r\n\r\n"))[0], "protocol");
  assert.equal((await code(""))[0], "io");
  assert.equal((await code("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"))[0], "io");
  assert.equal(
    (await code("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"))[0],
    "io",
  );
  assert.equal(
    (await code("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))[0],
    "protocol",
  );
  assert.equal((await code("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"))[0], "protocol");
});

Deno.test("encodeRequest writes one head with the body's length and refuses header injection", () => {
  const out = dec.decode(encodeRequest({
    method: "POST",
    path: "/1.0/instances?project=p",
    headers: { "Content-Type": "application/json", Host: "evil" },
    body: enc.encode("{}"),
  }));
  assert.equal(
    out,
    "POST /1.0/instances?project=p HTTP/1.1\r\nhost: incus\r\nconnection: close\r\n" +
      "content-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
  );
  assert.throws(
    () => encodeRequest({ method: "GET", path: "/", headers: { "x-a": "1\r\nx-b: 2" } }),
    TypeError,
  );
  assert.throws(
    () => encodeRequest({ method: "GET", path: "/1.0/instances/a b\r\nx: y", headers: {} }),
    TypeError,
  );
  assert.doesNotMatch(
    dec.decode(encodeRequest({ method: "GET", path: "/1.0", headers: {} })),
    /content-length/,
  );
});
