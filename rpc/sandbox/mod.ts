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
 *   // protectedPaths (never read nor mounted: rpc/host_paths.ts; added to the defaults of env)
 * });
 * ```
 *
 * The engine is composed here from one folder per concern, each with a `mod.ts` that maps it:
 * `spec/` (parsing the spec format), `resolve/` (spec + host facts → desired state, pure),
 * `plan/` (desired vs actual → actions, and applying them), `egress/` (the egress bridge,
 * ACL and CA), `exec/` (running commands), `lifecycle/` (the locked operations: create,
 * ensure, start, stop, readiness), `instances/` (instances and volumes in Incus) and
 * `compose/` (compose files and `compose.*`).
 *
 * Every method takes its typed params and `{project?, progress?}`: `project` scopes the call
 * to an Incus project (`""`/`default` = default), `progress(line)` receives the human lines
 * of §9.2 (the `progress` events). Results are exactly the protocol's (§6).
 *
 * @module
 */

import type { IncusClient } from "../incus/mod.ts";
import type { Engine, EngineOptions } from "./_engine_types.ts";
// not compose/mod.ts: it re-exports the operations, which would evaluate them (see composeOps)
import { type ComposeFs, DENO_FS, protectFs } from "./compose/fs.ts";
import type { ComposeParams } from "./compose/ops.ts";
import { cachedServerInfo, desiredToJson, poolFacts, protectedHostPaths } from "./resolve/mod.ts";
import {
  ensureVolume,
  forceDelete,
  getVolume,
  listAllVolumes,
  listSandboxes,
  mustFindInstance,
  pickPool,
  prune,
  type PruneItem,
  removeVolume,
  type SandboxInfo,
  sandboxInfo,
  type VolumeInfo,
} from "./instances/mod.ts";
import {
  addPort,
  type CallOptions,
  clientFor,
  createSandbox,
  ensureSandbox,
  LOCK_WAIT_MS,
  planDesired,
  removeDevice,
  removeSandbox,
  resolveSpec,
  type Runtime,
  type SpecParams,
  startSandbox,
  stopSandbox,
  SYSTEM_CLOCK,
  waitSandboxReady,
} from "./lifecycle/mod.ts";

export type { CallOptions, ComposeFs, ComposeParams, SpecParams };
export type { SandboxInfo };
export type { PruneItem, VolumeInfo };
export type { Action, ApplyReport, Props, SandboxPlan } from "./plan/mod.ts";
export type { IncusClient };
export type {
  ExecDefaults,
  NamedVolumeSpec,
  PortSpec,
  ReadyCheck,
  SandboxSpec,
} from "./spec/mod.ts";
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
} from "./spec/mod.ts";
export { type Clock, SYSTEM_CLOCK } from "./lifecycle/mod.ts";

export type * from "./_engine_types.ts";

let composeLoading: Promise<typeof import("./compose/ops.ts")> | undefined;

/**
 * The compose operations, evaluated on the first `compose.*` call: they bring js-yaml, the
 * compose file's zod schemas and Deno's `node:path` (~10 ms), which no other method needs, and
 * `isb rpc` pays what it evaluates before its first answer.
 */
function composeOps(): Promise<typeof import("./compose/ops.ts")> {
  return composeLoading ??= import("./compose/ops.ts");
}

/** Builds the engine (see the module doc for the constructor call). */
export function createEngine(opts: EngineOptions): Engine {
  // always the defaults of this environment, whatever the caller adds (rpc/host_paths.ts)
  const roots = protectedHostPaths({
    env: opts.env,
    isbStateDir: opts.isbStateDir,
    extra: opts.protectedPaths ?? [],
  });
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
    protectedPaths: roots,
    serverInfo: cachedServerInfo(() => (opts.clock ?? SYSTEM_CLOCK).now()),
  };
  const fs = protectFs(opts.fs ?? DENO_FS, roots);
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

    composeLoad: async (p) => (await composeOps()).composeLoad(rt, fs, p),
    composeUp: async (p, o = {}) => (await composeOps()).composeUp(rt, fs, p, o),
    composePlan: async (p, o = {}) => (await composeOps()).composePlan(rt, fs, p, o),
    composeDown: async (p, o = {}) => (await composeOps()).composeDown(rt, fs, p, o),
  };
  return engine;
}
