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
