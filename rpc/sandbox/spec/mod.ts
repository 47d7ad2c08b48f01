/**
 * Spec parsing: the sandbox spec format (isb-rpc.md §7) as zod schemas, the types they
 * produce, and their normalised serialisation. Nothing here talks to Incus or the host; a
 * spec is checked before anything is known about where it will run.
 *
 * - `spec.ts`: the sandbox spec and the compose file around it, `parseSpec`, the JSON Schema
 * - `scalars.ts`: the lenient scalars (a number or a string that means one) and `poly`
 * - `parts.ts`: readiness checks, idmap, environment; `exec_defaults.ts`: exec defaults
 * - `service.ts`: the compose-only service fields (deploy, healthcheck, secrets, …)
 * - `mounts.ts`, `ports.ts`, `egress.ts`: the polymorphic fields
 * - `addr.ts`, `target.ts`, `egress_policy.ts`: what those fields mean, without a schema
 *   (the engine imports these, so it builds none of the schemas)
 * - `_type.ts`: the {@link SandboxSpec} type assembled from the parts
 *
 * @module
 */

export type {
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
  ReadyCheck,
  SandboxSpec,
  SecretRef,
  UpdateConfigSpec,
} from "./spec.ts";
export { parseSpec, serializeSpec, specJsonSchema } from "./spec.ts";
export type { EgressEntry, EgressPolicy, SecretBinding } from "./egress.ts";
