/**
 * Storage pools and custom volumes (the named volumes of sandboxes and compose files).
 *
 * @module
 */

import { type IncusConn, seg } from "./conn.ts";
import { type MutationOptions, waitIfAsync } from "./_mutate.ts";
import type { StoragePool, StorageVolume, Versioned } from "./types.ts";

/** `POST /1.0/storage-pools/POOL/volumes/custom` body. */
export interface VolumesPost {
  /** Name. */
  name: string;
  /** Configuration keys. */
  config?: Record<string, string>;
  /** Free-form description. */
  description?: string;
  /** `filesystem` (default) or `block`. */
  content_type?: "filesystem" | "block";
}

const volumes = (pool: string) => `/1.0/storage-pools/${seg(pool)}/volumes/custom`;

/** Lists storage pools. */
export async function listStoragePools(conn: IncusConn): Promise<StoragePool[]> {
  const r = await conn.sync<StoragePool[]>("GET", "/1.0/storage-pools", {
    query: { recursion: 1 },
  });
  return r.metadata ?? [];
}

/** Fetches one storage pool. */
export async function getStoragePool(conn: IncusConn, pool: string): Promise<StoragePool> {
  return (await conn.sync<StoragePool>("GET", `/1.0/storage-pools/${seg(pool)}`)).metadata;
}

/** Lists the custom volumes of a pool. */
export async function listVolumes(conn: IncusConn, pool: string): Promise<StorageVolume[]> {
  const r = await conn.sync<StorageVolume[]>("GET", volumes(pool), { query: { recursion: 1 } });
  return r.metadata ?? [];
}

/** Fetches one custom volume and its ETag. */
export async function getVolume(
  conn: IncusConn,
  pool: string,
  name: string,
): Promise<Versioned<StorageVolume>> {
  const r = await conn.sync<StorageVolume>("GET", `${volumes(pool)}/${seg(name)}`);
  return { value: r.metadata, etag: r.etag };
}

/** Creates a custom volume. */
export async function createVolume(
  conn: IncusConn,
  pool: string,
  req: VolumesPost,
  opts: MutationOptions,
): Promise<void> {
  const body = { content_type: "filesystem", config: {}, ...req };
  await waitIfAsync(conn, await conn.call("POST", volumes(pool), { body }), opts);
}

/** Deletes a custom volume (it must be unused). */
export async function deleteVolume(
  conn: IncusConn,
  pool: string,
  name: string,
  opts: MutationOptions,
): Promise<void> {
  await waitIfAsync(conn, await conn.call("DELETE", `${volumes(pool)}/${seg(name)}`), opts);
}
