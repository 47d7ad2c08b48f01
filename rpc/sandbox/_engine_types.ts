/**
 * The sandbox engine's surface as types: what `createEngine` (mod.ts) needs, the {@link Engine}
 * it returns and the params of its methods. Apart from the engine's construction (mod.ts,
 * which re-exports all of it) so that each file holds one concern.
 *
 * @module
 */

import type { IncusClient } from "../incus/mod.ts";
import type { ComposeParams } from "./compose/ops.ts";
import type { ComposeFs } from "./compose/fs.ts";
import type { ComposeLoadResult } from "./compose/load.ts";
import type { SandboxInfo } from "./instances/instance.ts";
import type { ApplyReport, SandboxPlan } from "./plan/plan.ts";
import type { Clock } from "../clock.ts";
import type { CallOptions, SpecParams } from "./lifecycle/sandbox_ops.ts";
import type { ExecDefaults, PortSpec, ReadyCheck } from "./spec/spec.ts";
import type { PruneItem, VolumeInfo } from "./instances/volume.ts";

export type { ComposeLoadResult };

/** What `createEngine` (mod.ts) needs. */
export interface EngineOptions {
  /** The Incus client of the server's default project. */
  incus: IncusClient;
  /** The server's working directory (absolute). */
  cwd: string;
  /** The server's environment snapshot. */
  env: Readonly<Record<string, string>>;
  /** Lock root (`$XDG_RUNTIME_DIR/isb` or `<tmp>/isb-<uid>/isb`). */
  lockDir: string;
  /** isb state directory (egress CAs and secrets files). */
  isbStateDir: string;
  /** Deadline of the create operation; the client's `createMs` when absent. */
  createTimeoutMs?: number | undefined;
  /** The server's `$TERM` (tty execs). */
  term?: string | undefined;
  /** Monotonic clock for deadlines and polling; the real one when absent. */
  clock?: Clock;
  /** Wall-clock milliseconds (stamps); `Date.now` when absent. */
  wallNow?: () => number;
  /** How long to wait for another holder of a sandbox's lock (15 min). */
  lockWaitMs?: number;
  /** Compose file access; Deno's file system when absent. */
  fs?: ComposeFs;
  /** Probe for taken TCP ports (searched ports); binding locally when absent. */
  inUse?: (host: string, port: number) => boolean;
  /** Host paths never read nor mounted (secret files, bind sources): see rpc/host_paths.ts. */
  protectedPaths?: readonly string[];
}

/** The engine. */
export interface Engine {
  /** The client for a project (absent: the server's default project). */
  client(project?: string): IncusClient;
  /** The server's `$TERM`. */
  readonly term: string | undefined;

  /** `sandbox.create`: the new sandbox's info; an existing one is `already_exists`. */
  create(p: SpecParams, o?: CallOptions): Promise<SandboxInfo>;
  /** `sandbox.ensure`: reconcile, then `{info, report}`. */
  ensure(p: SpecParams, o?: CallOptions): Promise<{ info: SandboxInfo; report: ApplyReport }>;
  /** `sandbox.plan`: what ensure would do (read-only). */
  plan(p: SpecParams, o?: CallOptions): Promise<SandboxPlan>;
  /** `sandbox.resolve`: the desired state (§6.6). */
  resolve(p: SpecParams, o?: CallOptions): Promise<Record<string, unknown>>;
  /** `sandbox.get`. */
  get(name: string, o?: CallOptions): Promise<SandboxInfo>;
  /** `sandbox.list`, filtered by labels (`key` or `key=value`). */
  list(labels: string[], o?: CallOptions): Promise<SandboxInfo[]>;
  /** `sandbox.remove` (a running one needs `force`). */
  remove(p: RemoveParams, o?: CallOptions): Promise<void>;
  /** `sandbox.start`. */
  start(name: string, o?: CallOptions): Promise<void>;
  /** `sandbox.stop`. */
  stop(p: StopParams, o?: CallOptions): Promise<void>;
  /** `sandbox.restart`: clean stop, then start. */
  restart(name: string, o?: CallOptions): Promise<void>;
  /** `sandbox.wait_ready`. */
  waitReady(p: WaitReadyParams, o?: CallOptions): Promise<void>;
  /** `sandbox.add_port`. */
  addPort(p: { name: string; port: PortSpec }, o?: CallOptions): Promise<{ listen: string }>;
  /** `sandbox.remove_device`. */
  removeDevice(p: { name: string; device: string }, o?: CallOptions): Promise<{ removed: boolean }>;

  /** `volume.list`: one pool's volumes, or every pool's. */
  volumeList(p: { pool?: string | undefined }, o?: CallOptions): Promise<VolumeInfo[]>;
  /** `volume.get`. */
  volumeGet(p: VolumeParams, o?: CallOptions): Promise<VolumeInfo>;
  /** `volume.create`: `{created, pool}`. */
  volumeCreate(p: VolumeParams, o?: CallOptions): Promise<{ created: boolean; pool: string }>;
  /** `volume.remove` (refused while in use). */
  volumeRemove(p: VolumeParams, o?: CallOptions): Promise<void>;
  /** `prune` (a dry run unless `dry_run: false`). */
  prune(p: { label: string; dry_run?: boolean | undefined }, o?: CallOptions): Promise<PruneItem[]>;

  /** `compose.load`. */
  composeLoad(p: ComposeParams, o?: CallOptions): Promise<ComposeLoadResult>;
  /** `compose.up`: `[{service, report}]` in dependency order. */
  composeUp(p: ComposeParams, o?: CallOptions): Promise<{ service: string; report: ApplyReport }[]>;
  /** `compose.plan`: one plan per service, in dependency order. */
  composePlan(p: ComposeParams, o?: CallOptions): Promise<SandboxPlan[]>;
  /** `compose.down`. */
  composeDown(p: ComposeParams, o?: CallOptions): Promise<null>;
}

/** Params of `sandbox.remove`. */
export interface RemoveParams {
  /** The sandbox. */
  name: string;
  /** Stop a running one first. */
  force?: boolean | undefined;
}

/** Params of `sandbox.stop`. */
export interface StopParams {
  /** The sandbox. */
  name: string;
  /** Kill instead of a clean shutdown. */
  force?: boolean | undefined;
  /** Clean-shutdown timeout (default 30 s). */
  timeoutMs?: number | undefined;
}

/** Params of `sandbox.wait_ready`. */
export interface WaitReadyParams {
  /** The sandbox. */
  name: string;
  /** Checks in order (default `["running"]`). */
  ready?: ReadyCheck[] | undefined;
  /** Shared deadline (default 60 s). */
  timeoutMs?: number | undefined;
  /** Exec defaults (`user` matters for `path_writable`). */
  exec?: ExecDefaults | undefined;
}

/** Params of the volume methods. */
export interface VolumeParams {
  /** The Incus volume name. */
  name: string;
  /** A pool, or `auto`/absent for the pool rule. */
  pool?: string | undefined;
  /** Config of a new volume (`volume.create` only). */
  config?: Record<string, string> | undefined;
}
