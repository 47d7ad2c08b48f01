/**
 * The coordinator grant from the command line (issue 20), on real Incus: `isx branch
 * --mcp-client` stamps `mcp-caller` (32 hex), a plain `isx branch` stamps none, `isx start`
 * keeps the grant a coordinator has (its session is the instance) and `isx start
 * --mcp-client` makes a plain instance one. Branches of the built tpl-minimal, named
 * `t-coordg-…`, removed at the end; a throw-away isx home; `--no-preflight` (no proxy runs).
 *
 * @module
 */

import assert from "node:assert/strict";
import { readStamps, SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import { liveIncus, NO_INCUS, removeInstance, testName } from "../helpers/live.ts";
import { labProxyYaml } from "../helpers/lab.ts";
import { ensureBuilt } from "../helpers/built.ts";
import { IsxHome } from "../templates_env.ts";

const TEMPLATE = "tpl-minimal";
// built in this run's lab (tests/helpers/built.ts)
if (!NO_INCUS) await ensureBuilt(TEMPLATE);
const c = liveIncus({ timeouts: { requestMs: SLOW_DAEMON_MS } });
const built = !NO_INCUS && await c.getInstance(TEMPLATE).then(
  (t) => readStamps(t.value.config)["type"] === "base",
  () => false,
);
c.close();

Deno.test({
  name: "isx branch|start --mcp-client stamp the coordinator grant; a plain branch has none",
  ignore: !built,
  async fn(t) {
    const incus = liveIncus({ timeouts: { requestMs: SLOW_DAEMON_MS } });
    await using home = new IsxHome();
    // an ops port nothing answers on: no proxy is asked anything (not even the user's)
    Deno.mkdirSync(home.configDir, { recursive: true });
    Deno.writeTextFileSync(`${home.configDir}/config.yaml`, labProxyYaml());
    const [coord, plain] = [testName("coordg"), testName("coordg")];
    const grant = async (n: string) =>
      readStamps((await incus.getInstance(n)).value.config)["mcp-caller"];
    try {
      let g = "";
      await t.step("isx branch --mcp-client stamps a grant; without it there is none", async () => {
        const r = await home.isx([
          "branch",
          coord,
          "--from",
          TEMPLATE,
          "--mcp-client",
          "--no-preflight",
        ]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        g = (await grant(coord)) ?? "";
        assert.match(g, /^[0-9a-f]{32}$/);
        const p = await home.isx(["branch", plain, "--from", TEMPLATE, "--no-preflight"]);
        assert.equal(p.code, 0, p.stdout + p.stderr);
        assert.equal(await grant(plain), undefined);
      });
      await t.step(
        "isx start keeps a coordinator's grant; --mcp-client makes a plain one",
        async () => {
          assert.equal((await home.isx(["stop", coord, plain])).code, 0);
          const r = await home.isx(["start", "--no-preflight", "--mcp-client", coord]);
          assert.equal(r.code, 0, r.stdout + r.stderr);
          assert.equal(await grant(coord), g, "the same session across starts");
          const s = await home.isx(["start", "--no-preflight", plain]);
          assert.equal(s.code, 0, s.stdout + s.stderr);
          assert.equal(
            await grant(plain),
            undefined,
            "a start without --mcp-client grants nothing",
          );
          const m = await home.isx(["start", "--no-preflight", "--mcp-client", plain]);
          assert.equal(m.code, 0, m.stdout + m.stderr);
          assert.match((await grant(plain)) ?? "", /^[0-9a-f]{32}$/);
          assert.notEqual(await grant(plain), g);
        },
      );
    } finally {
      for (const n of [coord, plain]) await removeInstance(incus, n).catch(() => {});
      incus.close();
    }
  },
});
