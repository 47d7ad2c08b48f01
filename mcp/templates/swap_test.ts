import assert from "node:assert/strict";
import { asideName, type SwapOps, swapTemplate } from "./swap.ts";

/**
 * Instances as a map name → content, with renames that fail on demand (what a real Incus
 * cannot be made to do): `failRename` lists "from>to" pairs that throw.
 */
class MapOps implements SwapOps {
  readonly names = new Map<string, string>();
  readonly log: string[] = [];
  failRename = new Set<string>();
  failRemove = false;

  exists(name: string) {
    return Promise.resolve(this.names.has(name));
  }
  rename(from: string, to: string) {
    this.log.push(`rename ${from}>${to}`);
    if (this.failRename.has(`${from}>${to}`)) return Promise.reject(new Error("incus said no"));
    if (!this.names.has(from) || this.names.has(to)) throw new Error(`bad rename ${from}>${to}`);
    this.names.set(to, this.names.get(from)!);
    this.names.delete(from);
    return Promise.resolve();
  }
  remove(name: string) {
    this.log.push(`remove ${name}`);
    if (this.failRemove) return Promise.reject(new Error("busy"));
    this.names.delete(name);
    return Promise.resolve();
  }
}

Deno.test("swapTemplate replaces the old template, leaving exactly one under the name", async () => {
  const ops = new MapOps();
  ops.names.set("tpl", "old").set("tpl-build", "new");
  assert.equal(await swapTemplate(ops, "tpl-build", "tpl"), true);
  assert.deepEqual([...ops.names], [["tpl", "new"]]);
  assert.deepEqual(ops.log, ["rename tpl>tpl-prev", "rename tpl-build>tpl", "remove tpl-prev"]);
});

Deno.test("swapTemplate of a first build only renames it in", async () => {
  const ops = new MapOps();
  ops.names.set("tpl-build", "new");
  assert.equal(await swapTemplate(ops, "tpl-build", "tpl"), false);
  assert.deepEqual([...ops.names], [["tpl", "new"]]);
});

Deno.test("swapTemplate puts the old template back when the new one cannot be renamed in", async () => {
  const ops = new MapOps();
  ops.names.set("tpl", "old").set("tpl-build", "new");
  ops.failRename.add("tpl-build>tpl");
  await assert.rejects(swapTemplate(ops, "tpl-build", "tpl"), /incus said no/);
  assert.equal(ops.names.get("tpl"), "old", "the old template is usable under its name");
  assert.equal(ops.names.get("tpl-build"), "new", "the new build is kept for inspection");
  assert.equal(ops.names.has(asideName("tpl")), false);
});

Deno.test("swapTemplate keeps the new template when the old one cannot be deleted", async () => {
  const ops = new MapOps();
  ops.names.set("tpl", "old").set("tpl-build", "new");
  ops.failRemove = true;
  const notes: string[] = [];
  assert.equal(await swapTemplate(ops, "tpl-build", "tpl", (l) => notes.push(l)), true);
  assert.equal(ops.names.get("tpl"), "new");
  assert.match(notes[0]!, /could not delete the previous build tpl-prev/);
  // the next swap clears the leftover first
  ops.failRemove = false;
  ops.names.set("tpl-build", "newer");
  await swapTemplate(ops, "tpl-build", "tpl", (l) => notes.push(l));
  assert.deepEqual([...ops.names], [["tpl", "newer"]]);
  assert.match(notes[1]!, /removed tpl-prev, left by an earlier interrupted swap/);
});

Deno.test("swapTemplate puts back an old template a crash left aside, then swaps", async () => {
  const ops = new MapOps();
  ops.names.set("tpl-prev", "old").set("tpl-build", "new");
  const notes: string[] = [];
  assert.equal(await swapTemplate(ops, "tpl-build", "tpl", (l) => notes.push(l)), true);
  assert.deepEqual([...ops.names], [["tpl", "new"]]);
  assert.match(notes[0]!, /put back tpl from tpl-prev/);
});

Deno.test("a failed put-back reports the failure that caused it, not only its own", async () => {
  const ops = new MapOps();
  ops.names.set("tpl", "old").set("tpl-build", "new");
  ops.failRename.add("tpl-build>tpl").add("tpl-prev>tpl");
  await assert.rejects(
    swapTemplate(ops, "tpl-build", "tpl"),
    /^IsbError: incus said no; putting the previous template back from "tpl-prev" also failed \(incus said no\): the next build of tpl puts it back$/,
  );
  // and the next swap does put it back before renaming the new build in
  ops.failRename.clear();
  assert.equal(await swapTemplate(ops, "tpl-build", "tpl"), true);
  assert.deepEqual([...ops.names], [["tpl", "new"]]);
});
