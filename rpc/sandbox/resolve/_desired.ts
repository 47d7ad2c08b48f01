/**
 * The {@link Desired} state resolution produces, and its wire form for `sandbox.resolve`
 * (isb-rpc.md §6.6): secret values (config keys in `sensitive`, exec environment keys in
 * `sensitiveExec`) render as `(secret)`, and maps are sorted. Pure.
 *
 * @module
 */

import type { EgressPlan } from "../egress/names.ts";
import type { ExecDefaults, IdmapMode, ReadyCheck } from "../spec/parts.ts";
import type { DesiredDevice, EnsureVolume, OwnerFixup } from "./devices.ts";
import type { ImageSource } from "./image.ts";

export type { DesiredDevice, EnsureVolume, ImageSource, OwnerFixup };

/** What plans and reports show for a secret value. */
export const REDACTED = "(secret)";

/** A spec resolved against the host: what incus should hold. */
export interface Desired {
  /** The instance name. */
  name: string;
  /** A system container or a VM. */
  instance_type: "container" | "virtual-machine";
  /** Where the image comes from (used at create only). */
  image: ImageSource;
  /** The storage pool of the root disk. */
  pool: string;
  /** The profiles, in order. */
  profiles: string[];
  /** Instance config keys the spec sets. */
  config: Record<string, string>;
  /** Includes the `root` disk (create-only; never reconciled). */
  devices: Record<string, DesiredDevice>;
  /** Named volumes to create if missing before the devices are added. */
  volumes: EnsureVolume[];
  /** Owner fixups of mount points, after start (isb-rpc.md §9.4). */
  owners: OwnerFixup[];
  /** Readiness checks, in order. */
  ready: ReadyCheck[];
  /** Defaults for later execs (user, cwd, env). */
  exec: ExecDefaults;
  /** Deadline for all readiness checks together. */
  readyTimeoutMs: number;
  /** The idmap mode the spec chose (an absent `raw.idmap` is then a decision). */
  idmapMode?: IdmapMode;
  /** Config keys holding secret values: set, never shown. */
  sensitive: string[];
  /** `exec.env` keys holding secret values. */
  sensitiveExec: string[];
  /** The egress plumbing the spec asks for. */
  egress?: EgressPlan;
}

/** `o` with its keys in code-point order. */
export function sortKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The `sandbox.resolve` result (§6.6); secret values show as `(secret)`. */
export function desiredToJson(d: Desired): Record<string, unknown> {
  const config = sortKeys(
    Object.fromEntries(
      Object.entries(d.config).map(([k, v]) => [k, d.sensitive.includes(k) ? REDACTED : v]),
    ),
  );
  const exec: ExecDefaults = { ...d.exec };
  if (d.exec.env) {
    exec.env = Object.fromEntries(
      Object.entries(d.exec.env).map(([k, v]) => [k, d.sensitiveExec.includes(k) ? REDACTED : v]),
    );
  }
  return {
    name: d.name,
    instance_type: d.instance_type,
    image: { ...d.image },
    pool: d.pool,
    profiles: [...d.profiles],
    config,
    devices: Object.fromEntries(
      Object.entries(d.devices).map((
        [k, v],
      ) => [k, v.search ? { props: v.props, search: v.search } : { props: v.props }]),
    ),
    volumes: d.volumes,
    owners: d.owners,
    ready: d.ready,
    exec,
  };
}
