/**
 * The `tpl-agents` template the agents lab (agents_lab.ts) copies: whether it is there, and
 * building it once when it is not (the live tests that need it call one or the other).
 * Apart from the lab because it is about the image, built by `isx build` in a throw-away
 * isx home, not about one lab's instance, proxy and mocks.
 *
 * @module
 */

import { createIncusClient, isNotFound } from "../../rpc/mod.ts";
import { LIVE_PROJECT, LIVE_SOCKET } from "./live.ts";
import { ensureBuilt } from "./built.ts";

/** The template the lab copies. */
export const AGENTS_TEMPLATE = Deno.env.get("ISX_TEST_AGENTS_TEMPLATE") || "tpl-agents";

/** True when the template the lab copies exists. */
export async function haveTemplate(): Promise<boolean> {
  const c = createIncusClient({ socket: LIVE_SOCKET, project: LIVE_PROJECT });
  try {
    await c.getInstance(AGENTS_TEMPLATE);
    return true;
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  } finally {
    c.close();
  }
}

/**
 * Builds the template when it is missing (`isx build tpl-agents` in a throw-away isx home,
 * npm packages through the shared test cache), once per lab (tests/helpers/built.ts). It
 * stays for the rest of the run and goes with the run's lab.
 */
export async function ensureTemplate(): Promise<void> {
  const cache = Deno.env.get("ISX_TEST_CACHE") ??
    `${Deno.env.get("HOME") ?? "/root"}/.cache/isx-test`;
  await ensureBuilt(AGENTS_TEMPLATE, { cacheDir: cache, timeoutMs: 1_800_000 });
}
