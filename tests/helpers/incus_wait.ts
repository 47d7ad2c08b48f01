/**
 * Waiting on the live Incus, without the live gate or a lab (so benches can use them too):
 * unique test names, removing an instance whatever its state, polling until a value.
 * tests/helpers/live.ts re-exports them.
 *
 * @module
 */

import { type IncusClient, isNotFound } from "../../rpc/mod.ts";

/** A unique instance name for a test: `t-<area>-<random>`. */
export function testName(area: string): string {
  return `t-${area}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Deletes `name` whatever state it is in, retrying while Incus is still busy with it. */
export async function removeInstance(incus: IncusClient, name: string): Promise<void> {
  let absent = 0;
  let seen = false;
  const until = Date.now() + 120_000;
  while (Date.now() < until) {
    try {
      await incus.getInstance(name);
      seen = true;
    } catch (e) {
      // A create that timed out on our side may still land: look a few times before leaving.
      if (isNotFound(e) && (seen || ++absent >= 5)) return;
      if (isNotFound(e)) {
        await new Promise((r) => setTimeout(r, 2000));
        continue;
      }
    }
    await incus.stopInstance(name, { step: `stop ${name}`, force: true }).catch(() => {});
    await incus.deleteInstance(name, { step: `delete ${name}` }).catch(() => {});
    await new Promise((r) => setTimeout(r, 1000)); // retry pace, not a wait for a state
  }
  throw new Error(`could not delete test instance ${name}`);
}

/** Polls `probe` every `everyMs` until it gives a value; after `ms` throws naming `what`. */
export async function until<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  ms = 60_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
