import assert from "node:assert/strict";
import { splitWords } from "./scalars.ts";

const WORDS = [
  { in: `echo "a \\"b\\" $X" c\\ d ''`, out: ["echo", 'a "b" $X', "c d", ""] },
  { in: "a  b\tc", out: ["a", "b", "c"] },
];

for (const c of WORDS) {
  Deno.test(`splitWords splits ${JSON.stringify(c.in)} like a shell`, () => {
    assert.deepStrictEqual(splitWords(c.in), c.out);
  });
}

Deno.test("splitWords refuses an unterminated quote", () => {
  assert.throws(() => splitWords("echo 'oops"), /unterminated/);
});
