import assert from "node:assert/strict";
import { LineSplitter, TailBuffer } from "./tail.ts";

const enc = new TextEncoder();

Deno.test("TailBuffer keeps the last bytes at every cut of the input", () => {
  const text = "héllo wörld — ünïcode line\nsecond line\n";
  const bytes = enc.encode(text);
  for (const cap of [5, 16, 1000]) {
    const want = new TailBuffer(cap);
    want.push(bytes);
    for (let i = 0; i <= bytes.length; i++) {
      const t = new TailBuffer(cap);
      t.push(bytes.subarray(0, i));
      t.push(bytes.subarray(i));
      assert.equal(t.text(), want.text(), `cap ${cap} cut ${i}`);
      assert.equal(t.total, bytes.length);
      assert.equal(t.truncated, bytes.length > cap);
    }
    assert.ok(text.endsWith(want.text()), `cap ${cap}: ${want.text()}`);
  }
});

Deno.test("LineSplitter gives the same lines at every cut, the last one on end", () => {
  const bytes = enc.encode("a\r\nbé\n\nlast");
  for (let i = 0; i <= bytes.length; i++) {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    s.push(bytes.subarray(0, i));
    s.push(bytes.subarray(i));
    s.end();
    assert.deepEqual(lines, ["a", "bé", "", "last"], `cut ${i}`);
  }
});
