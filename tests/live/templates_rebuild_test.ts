/**
 * `isx build` against a real incusd, as an attacker who can write the host's .deb cache (or a
 * build whose scripts ran as root and handed back a changed package) would meet it: a cached
 * package that no longer matches the SHA-256 apt expects is dropped and fails the build, the
 * failed rebuild leaves the old template in place and usable, and the next rebuild swaps the
 * new build in, leaving exactly one instance under the template's name.
 */

import assert from "node:assert/strict";
import { LIVE_IMAGE, LIVE_PROJECT, LIVE_SOCKET, NO_INCUS, testName } from "../helpers/live.ts";
import { IsxHome } from "../templates_env.ts";
import { createIncusClient } from "../../rpc/mod.ts";
import { readStamps, SLOW_DAEMON_MS, STAMP } from "../../mcp/mod.ts";
import { ensureCa } from "../../proxy/mod.ts";

Deno.test({
  name: "isx build refuses a tampered cached .deb and swaps a rebuilt template atomically",
  ignore: NO_INCUS,
  async fn(t) {
    const tpl = testName("hard-tpl");
    await using home = new IsxHome();
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const apt = `${home.cacheDir}/downloads/apt`;
    const mine = async () =>
      (await c.listInstances()).map((i) => i.name).filter((n) => n.startsWith(tpl)).sort();
    const buildId = async () => readStamps((await c.getInstance(tpl)).value.config)[STAMP.buildId];
    const jqDeb = () => [...Deno.readDirSync(apt)].map((e) => e.name).find((n) => /^jq_/.test(n));
    try {
      await ensureCa(`${home.stateDir}/ca`);
      home.define("templates", tpl, `image: ${LIVE_IMAGE}\npackages: [jq]\n`);

      let first: string | undefined;
      const built = await t.step("the first build caches the .debs apt fetched", async () => {
        const r = await home.isx(["build", "-q", tpl]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        assert.ok(jqDeb(), `no jq .deb cached in ${apt}`);
        first = await buildId();
        assert.deepEqual(await mine(), [tpl]);
      });
      if (!built) return;

      const refused = await t.step(
        "a tampered cached .deb fails the rebuild, is dropped, and the old template stays",
        async () => {
          const deb = jqDeb()!;
          Deno.writeTextFileSync(`${apt}/${deb}`, "#!/bin/sh\necho pwned\n");
          const r = await home.isx(["build", "-q", tpl]);
          assert.notEqual(r.code, 0, r.stdout + r.stderr);
          assert.match(
            r.stdout + r.stderr,
            new RegExp(`cached package ${deb.replace(/[.+]/g, "\\$&")} does not match the SHA-256`),
          );
          assert.equal(jqDeb(), undefined, "the tampered file is removed from the cache");
          assert.equal(await buildId(), first, "the old template is untouched");
          assert.equal((await c.getInstanceState(tpl)).status, "Stopped");
          // still usable: Incus copies it (what isx branch does)
          const copy = `${tpl}-copy`;
          await c.createInstance({
            name: copy,
            source: { type: "copy", source: tpl, instance_only: true },
          }, { step: `copy ${tpl}` });
          await c.deleteInstance(copy, { step: `delete ${copy}` });
        },
      );
      if (!refused) return;

      await t.step("the next rebuild swaps in, leaving exactly one template", async () => {
        const r = await home.isx(["build", "-q", tpl]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const now = await buildId();
        assert.ok(now && now !== first, `build id ${now} after ${first}`);
        assert.deepEqual(await mine(), [tpl], "no -build or -prev left over");
        assert.ok(jqDeb(), "the package is cached again, checked");
      });
    } finally {
      for (const n of await mine().catch(() => [] as string[])) {
        await c.stopInstance(n, { step: "cleanup", force: true }).catch(() => {});
        await c.deleteInstance(n, { step: "cleanup" }).catch(() => {});
      }
      c.close();
    }
  },
});
