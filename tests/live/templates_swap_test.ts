/**
 * The template swap (mcp/templates/swap.ts) against a real incusd whose rename fails half-way.
 * Incus 6.0 renames an instance's storage and database row before moving its log directory
 * (`/var/log/incus/<name>`) and undoes neither when that move fails, so the operation reports
 * an error while the instance already holds the new name. Seen under load during
 * `isx build --out-of-sync` (the swap then tried to put the old template back onto the name
 * the new build held: `Name "…" already in use`, 409). A mount on the source's log directory
 * makes that move fail on demand; the swap must finish, with one template under the name.
 */

import assert from "node:assert/strict";
import {
  LIVE_IMAGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
  removeInstance,
  testName,
} from "../helpers/live.ts";
import { createIncusClient } from "../../rpc/mod.ts";
import { SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import { asideName, incusSwapOps, swapTemplate } from "../../mcp/templates/swap.ts";

const INCUS_LOGS = "/var/log/incus";

async function run(...cmd: string[]): Promise<void> {
  const out = await new Deno.Command(cmd[0]!, { args: cmd.slice(1) }).output();
  if (!out.success) throw new Error(`${cmd.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
}

Deno.test({
  name: "a template swap finishes when Incus reports a rename failed that it made",
  ignore: NO_INCUS,
  async fn() {
    const tpl = testName("swap");
    const built = `${tpl}-build`;
    const c = createIncusClient({
      socket: LIVE_SOCKET,
      project: LIVE_PROJECT,
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    // a project other than default prefixes its instances' directories with `<project>_`
    const logDir = `${INCUS_LOGS}/${LIVE_PROJECT}_${built}`;
    let mounted = false;
    try {
      for (const [name, gen] of [[tpl, "old"], [built, "new"]]) {
        await c.createInstance({
          name: name!,
          source: { type: "image", alias: LIVE_IMAGE },
          config: { "user.isx-test.gen": gen! },
        }, { step: `create ${name}` });
      }
      assert.ok(Deno.statSync(logDir).isDirectory, `incusd keeps no log directory at ${logDir}`);
      await run("mount", "-t", "tmpfs", "isx-test", logDir); // a mount point cannot be renamed
      mounted = true;

      const notes: string[] = [];
      const note = (l: string) => notes.push(l);
      assert.equal(await swapTemplate(incusSwapOps(c, note), built, tpl, note), true);
      const gen = (await c.getInstance(tpl)).value.config["user.isx-test.gen"];
      assert.equal(gen, "new", "the new build holds the template's name");
      const left = (await c.listInstances()).map((i) => i.name).filter((n) => n.startsWith(tpl));
      assert.deepEqual(left, [tpl], `no ${built} or ${asideName(tpl)} left`);
      assert.ok(
        notes.some((l) => l.includes(`rename of ${built} to ${tpl} failed, but it took effect`)),
        notes.join("\n"),
      );
    } finally {
      if (mounted) await run("umount", "-l", logDir).catch(() => {});
      for (const n of [tpl, built, asideName(tpl)]) {
        await removeInstance(c, n);
        await Deno.remove(`${INCUS_LOGS}/${n}`, { recursive: true }).catch(() => {});
      }
      c.close();
    }
  },
});
