/**
 * The library without the sandbox engine: errors, logging, the version, durations, JSON
 * lines, PEM/x509 helpers, the config YAML reader and the Incus client with the `incus` CLI's
 * remotes (config.yml, read with the YAML reader). `proxy/` imports this instead of `mod.ts`,
 * because the engine (compose, zod schemas, planning) would add ~25 MiB to the resident
 * memory of a process that never creates a sandbox (issue 11: the proxy's footprint).
 *
 * @module
 */

export * from "./errors.ts";
export * from "./x509.ts";
export * from "./duration.ts";
export * from "./jsonl.ts";
export * from "./log.ts";
export * from "./version.ts";
export * from "./incus/mod.ts";
export * from "./clock.ts";
export * from "./link_race.ts";
export * from "./sha256.ts";
export { parseYaml } from "./yaml.ts";
export {
  checkRemote,
  type IncusEndpoint,
  type IncusRemote,
  normalizeUrl,
  parseRemotes,
  type ReadText,
  type RemoteProbe,
  resolveRemote,
  type ResolveRemoteOptions,
} from "./incus/remote.ts";
export {
  checkHostPath,
  type HostPathContext,
  type ProtectedContext,
  protectedHostPaths,
} from "./host_paths.ts";
