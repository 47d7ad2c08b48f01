/**
 * Instances and volumes as the engine sees them in Incus: the `info` shape of a sandbox,
 * label filters, start/stop with isb's race rules and the forced delete (isb-rpc.md §5.3),
 * readiness checks (§10), named custom volumes and the pool rule (§5.6), `prune` (§5.7), and
 * a root-owned directory made in a guest.
 *
 * - `instance.ts`: find, list, info, start, stop, forced delete
 * - `ready.ts`: readiness checks on one deadline, restarting a guest that stopped
 * - `volume.ts`: volumes, pools, prune
 * - `guest_dir.ts`: a guest directory made if missing
 *
 * @module
 */

export {
  forceDelete,
  listSandboxes,
  mustFindInstance,
  type SandboxInfo,
  sandboxInfo,
} from "./instance.ts";
export {
  ensureVolume,
  getVolume,
  listAllVolumes,
  pickPool,
  prune,
  type PruneItem,
  type PruneOptions,
  removeVolume,
  type VolumeInfo,
} from "./volume.ts";
