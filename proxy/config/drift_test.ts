import { deepStrictEqual as assertEquals } from "node:assert/strict";
import { ConfigWatch } from "./drift.ts";

Deno.test("ConfigWatch.drifted names files edited, created or removed since start", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const [a, b, c] = [`${dir}/a.yaml`, `${dir}/b.yaml`, `${dir}/c.yaml`];
    await Deno.writeTextFile(a, "one");
    await Deno.writeTextFile(b, "two");
    const w = await ConfigWatch.start([a, b, c]);
    assertEquals(await w.drifted(), []);
    await Deno.writeTextFile(a, "one");
    assertEquals(await w.drifted(), [], "rewriting the same content is no drift");
    await Deno.writeTextFile(a, "ONE");
    await Deno.remove(b);
    await Deno.writeTextFile(c, "new");
    assertEquals(await w.drifted(), [a, b, c]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ConfigWatch.drifted compares a file with a canonical form by that form only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const a = `${dir}/config.yaml`;
    await Deno.writeTextFile(a, "port: 1\nhosts: x\n");
    // the canonical form keeps the first line (the restart-only part)
    const w = await ConfigWatch.start([a], { [a]: (t) => t.split("\n")[0]! });
    await Deno.writeTextFile(a, "port: 1\nhosts: y\n");
    assertEquals(await w.drifted(), [], "a change of the live part is no drift");
    await Deno.writeTextFile(a, "port: 2\nhosts: y\n");
    assertEquals(await w.drifted(), [a]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
