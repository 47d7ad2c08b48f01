/**
 * The parsed sandbox spec's type (shared/spec/isb-rpc.md §7), apart from the zod schemas in
 * `spec.ts` that produce it (which check at compile time that their output matches it).
 *
 * @module
 */

import type { EgressSpec } from "./egress.ts";
import type { MountSpec } from "./mounts.ts";
import type { EnvValue, IdmapSpec, ReadyCheck } from "./parts.ts";
import type { Dependency, DeploySpec, DomainSpec, HealthcheckSpec, SecretRef } from "./service.ts";
import type { PortSpec } from "./ports.ts";

/** A sandbox spec after parsing: exactly one compose service. */
export interface SandboxSpec {
  /** The Incus instance name (compose default `<project>-<service>`). */
  container_name?: string;
  /** Local alias or fingerprint, or `remote:alias` (`images:`, `docker:`, `oci:`, …). */
  image: string;
  /** Set only for a VM; absent means a container. */
  type?: "virtual-machine";
  /** The root disk's storage pool (`auto` picks one). */
  storage?: string;
  /** Whole CPUs, as `limits.cpu`. */
  cpus?: string;
  /** Pinned CPUs (`0-3`, `0,2`), as `limits.cpu`; exclusive with `cpus`. */
  cpuset?: string;
  /** Memory limit as written; docker units become binary ones in `limits.memory`. */
  mem_limit?: string;
  /** `security.privileged` (containers only). */
  privileged?: boolean;
  /** How the container's ids map to the host's (`raw.idmap`, §8.3). */
  idmap?: IdmapSpec;
  /** Profiles applied at create, in order (default `["default"]`). */
  incus_profiles?: string[];
  /** `user.<key>` config entries; never removed by reconcile. */
  labels?: Record<string, string>;
  /** `environment.<KEY>` config entries; a value may name a secret instead. */
  environment?: Record<string, EnvValue>;
  /** Bind and named-volume mounts, in long form. */
  volumes?: MountSpec[];
  /** Proxy devices forwarding host and guest ports. */
  ports?: PortSpec[];
  /** What must hold before the sandbox counts as ready (default per type). */
  ready?: ReadyCheck[];
  /** How long to wait for `ready` (default 60s, 300s for a VM). */
  ready_timeout?: string;
  /** The default exec user: `NAME`, `UID`, `UID:GID` or `NAME:GROUP` (default root). */
  user?: string;
  /** The default exec working directory (default the user's home). */
  working_dir?: string;
  /** Exec-only environment (never stored in config) and whether execs use a login shell. */
  exec?: { env?: Record<string, string>; login?: true };
  /** The service's command argv (OCI images and compose services). */
  command?: string[];
  /** Prefixed to `command` (OCI images only). */
  entrypoint?: string[];
  /** docker's restart policy, mapped to `boot.autostart` / `boot.autorestart`. */
  restart?: "no" | "always" | "on-failure" | "unless-stopped";
  /** The service's health probe (compose only). */
  healthcheck?: HealthcheckSpec;
  /** Services that must be started or healthy first, by name (compose only). */
  depends_on?: Record<string, Dependency>;
  /** docker's `deploy:`; only resource limits take effect. */
  deploy?: DeploySpec;
  /** Public hostnames routed to the service (stacks only; ignored here). */
  domains?: DomainSpec[];
  /** Top-level secrets delivered as files under `/run/secrets/` (compose.up). */
  secrets?: SecretRef[];
  /** Which hosts the sandbox may reach and which secrets its requests get (§13). */
  egress?: EgressSpec;
  /** Instance config set verbatim after the typed fields, overriding them. */
  raw_config?: Record<string, string>;
  /** Extra devices by name, each a props map (`root` is merged over the root disk). */
  raw_devices?: Record<string, Record<string, string>>;
}
