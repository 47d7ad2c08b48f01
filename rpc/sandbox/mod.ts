/**
 * The sandbox engine: everything `isb rpc` (and the MCP server) does to sandboxes, volumes
 * and compose projects, as typed async functions over an injected Incus client, clock and
 * file system. The server skin (`rpc/server/`) only parses params and forwards here.
 *
 * Construct it once per server:
 *
 * ```ts
 * const engine = createEngine({
 *   incus,                        // createIncusClient({socket, project: --project, timeouts})
 *   cwd: ctx.perm.cwd,            // relative base_dir / compose files / bind sources
 *   env: ctx.env,                 // ${VAR} fallback, HOME, ISB_HOST_PATH_MAP, egress secrets
 *   lockDir: ctx.perm.lockDir,    // $XDG_RUNTIME_DIR/isb (shared with the isb CLI's flock)
 *   isbStateDir: ctx.perm.isbStateDir, // egress/<bridge>/{ca.key,ca.crt,secrets.json}
 *   createTimeoutMs,              // --create-timeout (default: the client's createMs, 10 min)
 *   term: ctx.env.TERM,           // for tty execs
 *   // optional: clock {now, sleep}, wallNow, lockWaitMs, fs (compose file access), inUse,
 *   // protectedPaths (never read nor mounted: protected.ts)
 * });
 * ```
 *
 * Every method takes its typed params and `{project?, progress?}`: `project` scopes the call
 * to an Incus project (`""`/`default` = default), `progress(line)` receives the human lines
 * of §9.2 (the `progress` events). Results are exactly the protocol's (§6).
 *
 * @module
 */

import type { IncusClient } from "../incus/mod.ts";
import {
  composeDown,
  composeLoad,
  type ComposeParams,
  composePlan,
  composeUp,
} from "./compose_ops.ts";
import { type ComposeFs, DENO_FS } from "./compose_fs.ts";
import { protectFs } from "./protected.ts";
import { cachedServerInfo, poolFacts } from "./host_facts.ts";
import {
  forceDelete,
  listSandboxes,
  mustFindInstance,
  type SandboxInfo,
  sandboxInfo,
} from "./instance.ts";
import type { ApplyReport, SandboxPlan } from "./plan.ts";
import { type Clock, LOCK_WAIT_MS, SYSTEM_CLOCK } from "./lock.ts";
import { desiredToJson } from "./resolve.ts";
import {
  type CallOptions,
  clientFor,
  createSandbox,
  ensureSandbox,
  planDesired,
  removeSandbox,
  resolveSpec,
  type Runtime,
  type SpecParams,
} from "./sandbox_ops.ts";
import {
  addPort,
  removeDevice,
  startSandbox,
  stopSandbox,
  waitSandboxReady,
} from "./lifecycle_ops.ts";
import type { ExecDefaults, PortSpec, ReadyCheck } from "./spec.ts";
import {
  ensureVolume,
  getVolume,
  listAllVolumes,
  pickPool,
  prune,
  type PruneItem,
  removeVolume,
  type VolumeInfo,
} from "./volume.ts";

export type { CallOptions, ComposeFs, ComposeParams, SpecParams };
export type { SandboxInfo };
export type { PruneItem, VolumeInfo };
export type { Action, ApplyReport, Props, SandboxPlan } from "./plan.ts";
export type { IncusClient };
export type { ExecDefaults, NamedVolumeSpec, PortSpec, ReadyCheck, SandboxSpec } from "./spec.ts";
export type {
  Dependency,
  DeploySpec,
  DomainSpec,
  EgressSecretSpec,
  EgressSpec,
  EnvValue,
  HealthcheckSpec,
  IdmapMode,
  IdmapSpec,
  MountSpec,
  SecretRef,
  UpdateConfigSpec,
} from "./spec.ts";
export { type Clock, SYSTEM_CLOCK } from "./lock.ts";

/** What {@link createEngine} needs. */
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
  /** Host paths never read nor mounted (secret files, bind sources): see protected.ts. */
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

/** The `compose.load` result: the resolved file, serialised. */
export interface ComposeLoadResult {
  /** The sanitised project name. */
  name: string;
  /** The first file's directory (canonical). */
  base_dir: string;
  /** The files as given or found. */
  files: string[];
  /** The merged file with names and defaults filled. */
  file: Record<string, unknown>;
}

/** Builds the engine (see the module doc for the constructor call). */
export function createEngine(opts: EngineOptions): Engine {
  const rt: Runtime = {
    incus: opts.incus,
    clock: opts.clock ?? SYSTEM_CLOCK,
    wallNow: opts.wallNow ?? (() => Date.now()),
    cwd: opts.cwd,
    env: opts.env,
    lockDir: opts.lockDir,
    isbStateDir: opts.isbStateDir,
    createTimeoutMs: opts.createTimeoutMs ?? opts.incus.conn.timeouts.createMs,
    lockWaitMs: opts.lockWaitMs ?? LOCK_WAIT_MS,
    inUse: opts.inUse,
    protectedPaths: opts.protectedPaths ?? [],
    serverInfo: cachedServerInfo(() => (opts.clock ?? SYSTEM_CLOCK).now()),
  };
  const fs = protectFs(opts.fs ?? DENO_FS, opts.protectedPaths ?? []);
  const pool = async (incus: IncusClient, requested?: string) =>
    pickPool(await poolFacts(incus), requested);
  const engine: Engine = {
    client: (project) => clientFor(rt, project),
    term: opts.term,
    create: (p, o = {}) => createSandbox(rt, p, o),
    ensure: (p, o = {}) => ensureSandbox(rt, p, o),
    plan: async (p, o = {}) => {
      const incus = clientFor(rt, o.project);
      const desired = await resolveSpec(rt, incus, p);
      return (await planDesired(incus, desired, p.prune_devices ?? false)).plan;
    },
    resolve: async (p, o = {}) => desiredToJson(await resolveSpec(rt, clientFor(rt, o.project), p)),
    get: async (name, o = {}) =>
      sandboxInfo(await mustFindInstance(clientFor(rt, o.project), name)),
    list: (labels, o = {}) => listSandboxes(clientFor(rt, o.project), labels),
    remove: (p, o = {}) => removeSandbox(rt, p, o),
    start: (name, o = {}) => startSandbox(rt, name, o),
    stop: (p, o = {}) => stopSandbox(rt, p, o),
    restart: async (name, o = {}) => {
      await stopSandbox(rt, { name, force: false, timeoutMs: 30_000 }, o);
      await startSandbox(rt, name, o);
    },
    waitReady: (p, o = {}) => waitSandboxReady(rt, p, o),
    addPort: (p, o = {}) => addPort(rt, p, o),
    removeDevice: (p, o = {}) => removeDevice(rt, p, o),

    volumeList: (p, o = {}) => listAllVolumes(clientFor(rt, o.project), p.pool),
    volumeGet: async (p, o = {}) => {
      const incus = clientFor(rt, o.project);
      return getVolume(incus, await pool(incus, p.pool), p.name);
    },
    volumeCreate: async (p, o = {}) => {
      const incus = clientFor(rt, o.project);
      const where = await pool(incus, p.pool);
      const created = await ensureVolume(incus, where, { name: p.name, config: p.config ?? {} });
      return { created, pool: where };
    },
    volumeRemove: async (p, o = {}) => {
      const incus = clientFor(rt, o.project);
      await removeVolume(incus, await pool(incus, p.pool), p.name);
    },
    prune: (p, o = {}) => {
      const incus = clientFor(rt, o.project);
      return prune({
        label: p.label,
        dryRun: p.dry_run ?? true,
        list: () => listSandboxes(incus, [p.label]),
        remove: (name) => forceDelete(incus, name, rt.clock),
        ...(o.progress ? { progress: o.progress } : {}),
      });
    },

    composeLoad: (p) => composeLoad(rt, fs, p),
    composeUp: (p, o = {}) => composeUp(rt, fs, p, o),
    composePlan: (p, o = {}) => composePlan(rt, fs, p, o),
    composeDown: (p, o = {}) => composeDown(rt, fs, p, o),
  };
  return engine;
}
