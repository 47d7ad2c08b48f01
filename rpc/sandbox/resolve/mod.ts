/**
 * Resolution: a parsed spec plus the host's facts → the {@link Desired} state of one
 * sandbox (isb-rpc.md §8). The rules are pure and synchronous; the facts are gathered first
 * by `host_facts.ts`, the one module here that does I/O, so a dead incusd answers `connect`
 * before any semantic check runs.
 *
 * - `resolve.ts`: spec → {@link Desired} (pure); `_desired.ts`: that state and its JSON form
 * - `devices.ts`: mounts and ports → Incus devices; `config.ts`: limits and raw config keys
 * - `host.ts`: the {@link HostFacts} shape and the idmap/home rules over it
 * - `image.ts`: image references → an Incus image source
 * - `host_facts.ts`: gathering the facts (storage pools, server info, subuid, real paths)
^ * - `../../host_paths.ts` (re-exported): the one canonical check of host paths, and the paths never read nor mounted
 * - `_raw_rules.ts`: what `raw_config` and `raw_devices` may say (host paths in devices, raw keys)
 *
 * @module
 */

export {
  type Desired,
  type DesiredDevice,
  desiredToJson,
  type EnsureVolume,
  type HostFacts,
  type ImageSource,
  type OwnerFixup,
  resolve,
  type ResolveOptions,
} from "./resolve.ts";
export { cachedServerInfo, poolFacts } from "./host_facts.ts";
export {
  absoluteHostPath,
  canonicalHostPath,
  checkHostPath,
  type HostPathContext,
  protectedHostPaths,
} from "../../host_paths.ts";
