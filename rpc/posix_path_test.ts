import assert from "node:assert/strict";
import { posix } from "node:path";
import { dirname, isAbsolute, join, normalize, resolve } from "./posix_path.ts";

const TABLE = [
  "",
  "/",
  "//",
  "///",
  ".",
  "..",
  "./",
  "../",
  "/.",
  "/..",
  "/../..",
  "a",
  "a/",
  "a//b",
  "a/./b",
  "a/../b",
  "a/..",
  "a/../",
  "../a",
  "../../a/..",
  "/a/b/../../..",
  "/a/b/c/",
  "//a",
  "/a//b///c",
  "~/.ssh",
  "/root/.ssh/../.ssh/id_ed25519",
  "/home/u/./.config/isx/",
  "a/...",
  "..a/b",
  "a/..b",
  ".../x",
  "/x/y/.../..",
];

/** Random paths over the characters the algorithms branch on. */
function randomPaths(n: number): string[] {
  const pieces = ["/", "/", ".", "..", "a", "bc", "...", ".x"];
  const out: string[] = [];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let i = 0; i < n; i++) {
    let p = "";
    const len = next() % 9;
    for (let k = 0; k < len; k++) p += pieces[next() % pieces.length];
    out.push(p);
  }
  return out;
}

const PATHS = [...TABLE, ...randomPaths(5000)];

Deno.test("normalize, dirname and isAbsolute are node:path's posix ones", () => {
  for (const p of PATHS) {
    assert.equal(normalize(p), posix.normalize(p), `normalize(${JSON.stringify(p)})`);
    assert.equal(dirname(p), posix.dirname(p), `dirname(${JSON.stringify(p)})`);
    assert.equal(isAbsolute(p), posix.isAbsolute(p), `isAbsolute(${JSON.stringify(p)})`);
  }
});

Deno.test("join and resolve are node:path's posix ones", () => {
  for (let i = 0; i + 2 < PATHS.length; i += 3) {
    const parts = PATHS.slice(i, i + 3);
    assert.equal(join(...parts), posix.join(...parts), `join(${JSON.stringify(parts)})`);
    assert.equal(resolve(...parts), posix.resolve(...parts), `resolve(${JSON.stringify(parts)})`);
    assert.equal(join(parts[0]!), posix.join(parts[0]!));
    assert.equal(resolve(parts[0]!), posix.resolve(parts[0]!));
  }
  assert.equal(join(), posix.join());
  assert.equal(resolve(), posix.resolve());
  assert.equal(resolve("/base", "x/../y"), "/base/y");
});
