/**
 * Replacing a template by its new build without a moment when neither exists: the old one
 * is renamed aside (`<name>-prev`), the new build renamed in, then the old one deleted. If
 * the new one cannot be renamed in, the old one is renamed back, so a failed rebuild leaves
 * the old template usable. A `<name>-prev` left by a crash between the steps is put back (no
 * template under the name) or removed (a template there) at the next swap.
 *
 * @module
 */

import { type IncusClient, isNotFound } from "../../rpc/mod.ts";

/** The instance operations a swap needs (Incus in builds; an in-memory map in tests). */
export interface SwapOps {
  /** True when the instance exists. */
  exists(name: string): Promise<boolean>;
  /** Renames a stopped instance. */
  rename(from: string, to: string): Promise<void>;
  /** Stops (if needed) and deletes an instance. */
  remove(name: string): Promise<void>;
}

/** Where the old template waits while the new one is renamed in. */
export function asideName(template: string): string {
  return `${template}-prev`;
}

/**
 * Puts `built` in place of `template`; resolves true when an older template was replaced.
 * The old one is deleted only once the new one holds the name.
 */
export async function swapTemplate(
  ops: SwapOps,
  built: string,
  template: string,
  note: (line: string) => void = () => {},
): Promise<boolean> {
  const aside = asideName(template);
  if (await ops.exists(aside)) {
    if (await ops.exists(template)) {
      await ops.remove(aside);
      note(`removed ${aside}, left by an earlier interrupted swap`);
    } else {
      await ops.rename(aside, template);
      note(`put back ${template} from ${aside}, left by an earlier interrupted swap`);
    }
  }
  const hadOld = await ops.exists(template);
  if (hadOld) await ops.rename(template, aside);
  try {
    await ops.rename(built, template);
  } catch (e) {
    if (hadOld) await ops.rename(aside, template);
    throw e;
  }
  if (hadOld) {
    try {
      await ops.remove(aside);
    } catch (e) {
      note(`could not delete the previous build ${aside} (the next build removes it): ${e}`);
    }
  }
  return hadOld;
}

/** {@link SwapOps} on Incus. */
export function incusSwapOps(client: IncusClient): SwapOps {
  return {
    async exists(name) {
      try {
        await client.getInstance(name);
        return true;
      } catch (e) {
        if (isNotFound(e)) return false;
        throw e;
      }
    },
    async rename(from, to) {
      const op = await client.call("POST", `/1.0/instances/${encodeURIComponent(from)}`, {
        body: { name: to },
      });
      if (op.kind === "async") await client.waitOperation(op, { step: `rename ${from} to ${to}` });
    },
    async remove(name) {
      const st = await client.getInstanceState(name);
      if (st.status !== "Stopped") {
        await client.stopInstance(name, { step: `stop ${name}`, force: true });
      }
      await client.deleteInstance(name, { step: `delete ${name}` });
    },
  };
}
