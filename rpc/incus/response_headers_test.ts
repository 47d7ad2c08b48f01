/** The unix exchange's header table reads as `Headers` does, and refuses what `Headers` refuses. */

import * as assert from "node:assert/strict";
import { ResponseHeaders } from "./response_headers.ts";
import { readResponse } from "./http_unix.ts";

function reader(text: string) {
  let data: Uint8Array | null = new TextEncoder().encode(text);
  return {
    read(p: Uint8Array): Promise<number | null> {
      if (data === null || data.length === 0) return Promise.resolve(null);
      const n = Math.min(p.length, data.length);
      p.set(data.subarray(0, n));
      data = data.subarray(n);
      return Promise.resolve(n);
    },
  };
}

Deno.test("get is case-insensitive, absent is null, repeats join with a comma as Headers does", () => {
  const pairs: [string, string][] = [["ETag", '"a1"'], ["X-Incus-UID", "1000"], ["Vary", "a"], [
    "vary",
    "b",
  ]];
  const mine = new ResponseHeaders();
  const theirs = new Headers();
  for (const [k, v] of pairs) {
    mine.append(k, v);
    theirs.append(k, v);
  }
  for (const name of ["etag", "ETAG", "x-incus-uid", "vary", "content-length"]) {
    assert.equal(mine.get(name), theirs.get(name), name);
  }
  assert.equal(mine.get("vary"), "a, b");
  assert.equal(mine.get("missing"), null);
});

Deno.test("a name that is not a token, or a value with NUL, CR or LF, is refused as by Headers", () => {
  for (
    const [k, v] of [["bad name", "x"], ["", "x"], ["x(y)", "x"], ["ok", "a\0b"], ["ok", "a\nb"], [
      "ok",
      "a\rb",
    ]] as [string, string][]
  ) {
    assert.throws(
      () => new Headers().append(k, v),
      TypeError,
      `Headers: ${JSON.stringify([k, v])}`,
    );
    assert.throws(() => new ResponseHeaders().append(k, v), TypeError, JSON.stringify([k, v]));
  }
});

Deno.test("readResponse reads headers into the table and refuses a bad field as protocol", async () => {
  const r = await readResponse(
    reader("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"),
  );
  assert.ok(r.headers instanceof ResponseHeaders);
  assert.equal(r.headers.get("CONTENT-TYPE"), "application/json");
  assert.equal(new TextDecoder().decode(r.body), "{}");
  await assert.rejects(
    () => readResponse(reader("HTTP/1.1 200 OK\r\nx-a: 1\0\r\nContent-Length: 0\r\n\r\n")),
    (e: unknown) => (e as { code?: string }).code === "protocol",
  );
});
