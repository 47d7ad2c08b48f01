/**
 * A template the live tests use, built in this run's lab when it is missing (`isx build` in a
 * throw-away isx home whose `config.yaml` names the lab's bridges). The lab is the run's own
 * (tests/helpers/lab.ts), so the user's templates (`tpl-minimal` of their install) are never
 * used nor touched: a run builds what it needs once and takes it away with the lab.
 *
 * @module
 */

import { equal } from "node:assert/strict";
import { isNotFound } from "../../rpc/mod.ts";
import { SLOW_DAEMON_MS } from "../../mcp/mod.ts";
import { LIVE_PROJECT, liveIncus } from "./live.ts";
import { IsxHome } from "../templates_env.ts";

async function exists(template: string): Promise<boolean> {
  const c = liveIncus({ timeouts: { requestMs: SLOW_DAEMON_MS } });
  try {
    await c.getInstance(template);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  } finally {
    c.close();
  }
}

/** Builds `template` (a built-in or one of `cacheDir`'s) in the lab unless it is there. */
export async function ensureBuilt(
  template: string,
  opts: { cacheDir?: string; timeoutMs?: number } = {},
): Promise<void> {
  if (await exists(template)) return;
  // one build per lab, whichever test file (or parallel run of the same lab) asks first
  const lock = await Deno.open(`/tmp/isx-test-build-${LIVE_PROJECT}-${template}.lock`, {
    create: true,
    write: true,
  });
  try {
    await lock.lock(true);
    if (await exists(template)) return;
    await using home = new IsxHome(opts.cacheDir ? { cacheDir: opts.cacheDir } : {});
    const init = await home.isx(["init", "--yes"]);
    equal(init.code, 0, init.stdout + init.stderr);
    const r = await home.isx(["build", "-q", template], { timeoutMs: opts.timeoutMs ?? 900_000 });
    equal(r.code, 0, `isx build ${template}: ${r.stdout}${r.stderr}`);
  } finally {
    lock.close();
    await Deno.remove(`/tmp/isx-test-build-${LIVE_PROJECT}-${template}.lock`).catch(() => {});
  }
}
