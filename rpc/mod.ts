/**
 * The isb library's public face: the Incus client, the sandbox engine and the shared
 * pieces (errors, durations, JSONL framing, logging, version). `mcp/`, `proxy/` and
 * `cli/` import this module only; nothing here imports them back.
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
export { createEngine, type Engine, type EngineOptions } from "./sandbox/mod.ts";
export {
  checkHostPath,
  type HostPathContext,
  type ProtectedContext,
  protectedHostPaths,
} from "./host_paths.ts";
export type {
  Action,
  ApplyReport,
  CallOptions as EngineCallOptions,
  ComposeFs,
  ComposeLoadResult,
  ComposeParams,
  Dependency,
  DeploySpec,
  DomainSpec,
  EgressSecretSpec,
  EgressSpec,
  EnvValue,
  ExecDefaults,
  HealthcheckSpec,
  IdmapMode,
  IdmapSpec,
  MountSpec,
  NamedVolumeSpec,
  PortSpec,
  Props,
  PruneItem,
  ReadyCheck,
  RemoveParams,
  SandboxInfo,
  SandboxPlan,
  SandboxSpec,
  SecretRef,
  SpecParams,
  StopParams,
  UpdateConfigSpec,
  VolumeInfo,
  VolumeParams,
  WaitReadyParams,
} from "./sandbox/mod.ts";
export type { ExecControl } from "./sandbox/exec/registry.ts";
export * from "./sandbox/exec/exec.ts";
export * from "./sandbox/exec/user.ts";
