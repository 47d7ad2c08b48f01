/**
 * A root-owned 0755 directory in a guest, made if missing. The files API answers an error
 * for a directory that already exists, so any error is left to the file push that follows
 * (which names what failed).
 *
 * @module
 */

import type { IncusClient } from "../../incus/mod.ts";

/** Makes `path` in instance `name` (root:root 0755) unless it is there. */
export async function ensureGuestDir(
  incus: Pick<IncusClient, "mkdir">,
  name: string,
  path: string,
): Promise<void> {
  await incus.mkdir(name, path, { step: `create ${path} in ${name}`, uid: 0, gid: 0, mode: 0o755 })
    .catch(() => {});
}
