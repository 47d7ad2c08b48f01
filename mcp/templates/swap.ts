/**
 * Replacing a template by its new build without a moment when neither exists: the old one
 * is renamed aside (`<name>-prev`), the new build renamed in, then the old one deleted. If
 * the new one cannot be renamed in, the old one is renamed back, so a failed rebuild leaves
 * the old template usable. A `<name>-prev` left by a crash between the steps is put back (no
 * template under the name) or removed (a template there) at the next swap.
 *
 * Incus 6.0 renames an instance's storage and database row before its log directory
 * (`/var/log/incus/<name>`), and undoes none of it when that last step fails: the operation
 * reports an error while the instance already holds the new name. Taken at its word, that
 * made the swap "put back" the old template onto a name the new build held, and the 409 of
 * that put-back hid the first error. So an Incus rename that fails is judged by what exists
 * afterwards, and a failed put-back is reported with the failure that caused it.
 *
 * @module
 */

import { type IncusClient, IsbError, isNotFound } from "../../rpc/base.ts";

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
    if (hadOld) await putBack(ops, aside, template, e);
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

/** Renames the old template back after the new build could not take its name. */
async function putBack(ops: SwapOps, aside: string, template: string, why: unknown) {
  try {
    await ops.rename(aside, template);
  } catch (e) {
    const first = why instanceof Error ? why.message : String(why);
    throw new IsbError(
      "operation_failed",
      `${first}; putting the previous template back from "${aside}" also failed (${
        e instanceof Error ? e.message : e
      }): the next build of ${template} puts it back`,
      { cause: why },
    );
  }
}

/** {@link SwapOps} on Incus; `note` hears of renames Incus reported failed but made. */
export function incusSwapOps(
  client: IncusClient,
  note: (line: string) => void = () => {},
): SwapOps {
  const exists = async (name: string) => {
    try {
      await client.getInstance(name);
      return true;
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  };
  return {
    exists,
    async rename(from, to) {
      try {
        const op = await client.call("POST", `/1.0/instances/${encodeURIComponent(from)}`, {
          body: { name: to },
        });
        if (op.kind === "async") {
          await client.waitOperation(op, { step: `rename ${from} to ${to}` });
        }
      } catch (e) {
        // the swap only renames onto a free name: `to` there and `from` gone means it happened
        // (a check that fails itself leaves the rename's own error to report)
        const made = await Promise.all([exists(from), exists(to)])
          .then(([f, t]) => !f && t, () => false);
        if (!made) throw e;
        note(`Incus reported the rename of ${from} to ${to} failed, but it took effect: ${e}`);
      }
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
