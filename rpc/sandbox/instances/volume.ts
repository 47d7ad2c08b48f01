/**
 * Named custom volumes (isb-rpc.md §5.6), the pool rule they and root disks share, and
 * `prune` (§5.7): deleting sandboxes whose label names a host path that is gone.
 *
 * Volumes are looked up and created through the Incus client only; "in use" is Incus's own
 * `used_by`, so a volume another tool attached is protected too. A lost creation race
 * counts as existing, as in isb.
 *
 * @module
 */

import { IsbError, isNotFound } from "../../errors.ts";
import type { IncusClient, StorageVolume } from "../../incus/mod.ts";

/** A volume as the protocol shows it. */
export interface VolumeInfo {
  /** Volume name. */
  name: string;
  /** Its pool. */
  pool: string;
  /** `filesystem` or `block`. */
  content_type: string;
  /** Volume config, values as strings. */
  config: Record<string, string>;
  /** Incus URLs of what uses it. */
  used_by: string[];
}

/** The result of `volume.create`. */
export interface VolumeCreated {
  /** Whether this call created it. */
  created: boolean;
  /** The pool the rule resolved to. */
  pool: string;
}

/** One instance `prune` considered. */
export interface PruneItem {
  /** The instance. */
  name: string;
  /** The label value (a host path that is gone). */
  path: string;
  /** False on a dry run. */
  deleted: boolean;
}

/** Stringifies every value of an Incus map (config values may arrive as non-strings). */
export function stringMap(m: Record<string, unknown> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(m ?? {})) {
    out[k] = typeof v === "string" ? v : JSON.stringify(v);
  }
  return out;
}

/** The protocol's view of an Incus volume. */
export function volumeInfo(pool: string, v: StorageVolume): VolumeInfo {
  return {
    name: v.name ?? "",
    pool,
    content_type: v.content_type ?? "",
    config: stringMap(v.config),
    used_by: (v.used_by ?? []).filter((u) => typeof u === "string"),
  };
}

/**
 * The pool rule: a named pool (not `""`/`auto`) must exist; otherwise `incus-zfs`, else
 * `default`, else the first pool.
 */
export function pickPool(pools: readonly string[], requested?: string | null): string {
  if (requested && requested !== "auto") {
    if (pools.includes(requested)) return requested;
    throw new IsbError(
      "invalid",
      `storage pool "${requested}" does not exist (have: ${pools.join(", ")})`,
    );
  }
  for (const p of ["incus-zfs", "default"]) if (pools.includes(p)) return p;
  const first = pools[0];
  if (first === undefined) throw new IsbError("invalid", "no storage pools exist");
  return first;
}

/** The names of every storage pool. */
export async function poolNames(incus: IncusClient): Promise<string[]> {
  return (await incus.listStoragePools()).map((p) => p.name);
}

/** The custom volumes of `pool`, sorted by name. */
export async function listPoolVolumes(incus: IncusClient, pool: string): Promise<VolumeInfo[]> {
  const vols = (await incus.listVolumes(pool)).map((v) => volumeInfo(pool, v));
  return vols.sort((a, b) => cmp(a.name, b.name));
}

/** Every pool's volumes (or one pool's), each pool's list sorted by name. */
export async function listAllVolumes(incus: IncusClient, pool?: string): Promise<VolumeInfo[]> {
  const pools = pool === undefined ? await poolNames(incus) : [pool];
  const out: VolumeInfo[] = [];
  for (const p of pools) out.push(...await listPoolVolumes(incus, p));
  return out;
}

/** One volume, or undefined when Incus has none by that name. */
export async function findVolume(
  incus: IncusClient,
  pool: string,
  name: string,
): Promise<VolumeInfo | undefined> {
  try {
    return volumeInfo(pool, (await incus.getVolume(pool, name)).value);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** One volume; a missing one is `not_found` "volume N in pool P not found". */
export async function getVolume(
  incus: IncusClient,
  pool: string,
  name: string,
): Promise<VolumeInfo> {
  const v = await findVolume(incus, pool, name);
  if (!v) throw new IsbError("not_found", `volume ${name} in pool ${pool} not found`);
  return v;
}

/** Creates the volume unless it exists; true when this call created it. */
export async function ensureVolume(
  incus: IncusClient,
  pool: string,
  opts: { name: string; config?: Record<string, string> },
): Promise<boolean> {
  if (await findVolume(incus, pool, opts.name)) return false;
  try {
    await incus.createVolume(
      pool,
      { name: opts.name, content_type: "filesystem", config: opts.config ?? {} },
      { step: `create volume ${opts.name}` },
    );
    return true;
  } catch (e) {
    // Lost a race with another creator: fine, as long as it exists now.
    if (await findVolume(incus, pool, opts.name)) return false;
    throw e;
  }
}

/** Deletes a volume; refuses one in use. */
export async function removeVolume(incus: IncusClient, pool: string, name: string): Promise<void> {
  const v = await getVolume(incus, pool, name);
  if (v.used_by.length > 0) {
    throw new IsbError("invalid", `volume ${name} is in use by ${v.used_by.join(", ")}`);
  }
  await incus.deleteVolume(pool, name, { step: `delete volume ${name}` });
}

/** Options of {@link prune}. */
export interface PruneOptions {
  /** The label holding a host path. */
  label: string;
  /** Report only. */
  dryRun: boolean;
  /** The instances with their labels (already filtered or not). */
  list(): Promise<{ name: string; labels: Record<string, string> }[]>;
  /** Force-deletes one instance. */
  remove(name: string): Promise<void>;
  /** True when the host path exists (as this process sees it). */
  exists?: (path: string) => Promise<boolean>;
  /** Receives one human line per pruned (or would-be pruned) sandbox. */
  progress?: (line: string) => void;
}

/** True when `path` exists; a path this process may not look at counts as existing. */
export async function hostPathExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (e) {
    return !(e instanceof Deno.errors.NotFound);
  }
}

/** Deletes instances whose `label` holds an absolute host path that no longer exists. */
export async function prune(opts: PruneOptions): Promise<PruneItem[]> {
  const exists = opts.exists ?? hostPathExists;
  const out: PruneItem[] = [];
  for (const i of await opts.list()) {
    const path = i.labels[opts.label];
    if (path === undefined || path === "" || !path.startsWith("/")) continue;
    if (await exists(path)) continue;
    const why = `${i.name}  (${opts.label}=${path} is gone)`;
    if (opts.dryRun) {
      opts.progress?.(`would delete ${why}`);
    } else {
      opts.progress?.(`deleting ${why}`);
      await opts.remove(i.name);
    }
    out.push({ name: i.name, path, deleted: !opts.dryRun });
  }
  return out;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
