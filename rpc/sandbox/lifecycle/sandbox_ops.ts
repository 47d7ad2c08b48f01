/**
 * The spec-taking sandbox operations of the engine (isb-rpc.md §5.2): resolve → lock → plan →
 * apply → readiness, plus `remove` and the shared runtime (the name-taking rest is in
 * `_lifecycle_ops.ts`). Each takes the engine's {@link Runtime} and a client already scoped to
 * the request's project.
 *
 * Order of failure for spec-taking calls (§5.2): the caller has parsed the spec (syntax);
 * {@link resolveSpec} asks incusd for host facts (so no incusd is `connect`) before any
 * semantic rule runs.
 *
 * @module
 */

import * as posix from "../../posix_path.ts";
import { IsbError } from "../../errors.ts";
import { log } from "../../log.ts";
import type { Image, IncusClient, ServerInfo } from "../../incus/mod.ts";
import { applyPlan } from "../plan/apply.ts";
import { afterReady, type EgressContext, egressNic, teardownEgress } from "../egress/egress.ts";
import { gatherHostFacts, type HostFacts } from "../resolve/host_facts.ts";
import {
  findInstance,
  forceDelete,
  mustFindInstance,
  type SandboxInfo,
  sandboxInfo,
} from "../instances/instance.ts";
import { acquireLock, type Clock, type NameLock } from "./_lock.ts";
import { type ApplyReport, plan as diff, restartLine, type SandboxPlan } from "../plan/plan.ts";
import { waitReady } from "../instances/ready.ts";
import { type Desired, resolve } from "../resolve/resolve.ts";
import type { NamedVolumeSpec, SandboxSpec } from "../spec/spec.ts";

/** Everything the engine's operations share (built once by `createEngine`). */
export interface Runtime {
  /** The client of the server's default project. */
  incus: IncusClient;
  /** Monotonic clock. */
  clock: Clock;
  /** Wall-clock milliseconds (stamps). */
  wallNow: () => number;
  /** The server's working directory. */
  cwd: string;
  /** The server's environment. */
  env: Readonly<Record<string, string>>;
  /** Lock root. */
  lockDir: string;
  /** isb state directory. */
  isbStateDir: string;
  /** Deadline of the create operation. */
  createTimeoutMs: number;
  /** How long to wait for another lock holder. */
  lockWaitMs: number;
  /** Probe for taken TCP ports (searched ports). */
  inUse?: ((host: string, port: number) => boolean) | undefined;
  /** `GET /1.0`, cached for a minute (host facts). */
  serverInfo: (incus: IncusClient) => Promise<ServerInfo>;
  /** Host paths never read nor mounted (rpc/host_paths.ts). */
  protectedPaths: readonly string[];
}

/** Per-call options: the Incus project and the progress sink. */
export interface CallOptions {
  /** Incus project for this call only (`""`/`default` = default). */
  project?: string | undefined;
  /** One human line per step (the `progress` events). */
  progress?: ((line: string) => void) | undefined;
}

/** The params every spec-taking method shares (§5.2). */
export interface SpecParams {
  /** The sandbox spec (one compose service). */
  spec: SandboxSpec;
  /** Anchors relative bind sources; the server's cwd when absent. */
  base_dir?: string | undefined;
  /** Named-volume definitions. */
  volumes?: Record<string, NamedVolumeSpec> | undefined;
  /** Run readiness checks after applying (default true). */
  wait_ready?: boolean | undefined;
  /** Remove local devices the spec does not mention (default false). */
  prune_devices?: boolean | undefined;
}

/** The client for a call's project. */
export function clientFor(rt: Runtime, project: string | undefined): IncusClient {
  return project === undefined ? rt.incus : rt.incus.withProject(project);
}

/** Host facts (incusd first), with the engine's protected paths. */
export async function hostFacts(rt: Runtime, incus: IncusClient): Promise<HostFacts> {
  const host = await gatherHostFacts(incus, { env: rt.env, serverInfo: rt.serverInfo });
  host.protectedPaths = rt.protectedPaths;
  return host;
}

/** Host facts (incusd first), then the spec's semantics. */
export async function resolveSpec(
  rt: Runtime,
  incus: IncusClient,
  p: SpecParams & { baseDir?: string; secretValues?: Record<string, string> },
): Promise<Desired> {
  const host = await hostFacts(rt, incus);
  const baseDir = p.baseDir ?? (p.base_dir ? posix.resolve(rt.cwd, p.base_dir) : rt.cwd);
  const desired = resolve(p.spec, {
    host,
    baseDir,
    volumeDefs: p.volumes ?? {},
    project: incus.project,
    ...(p.secretValues ? { secretValues: p.secretValues } : {}),
  });
  // The egress ACL is bound on the sandbox's bridge, not its NIC (see egress.ts).
  if (desired.egress) desired.devices.eth0 = { props: egressNic(desired.egress) };
  return desired;
}

/** Reads what the plan compares against, and diffs. */
export async function planDesired(
  incus: IncusClient,
  desired: Desired,
  pruneDevices = false,
): Promise<{ plan: SandboxPlan; images: readonly Image[] | undefined }> {
  const actual = await findInstance(incus, desired.name);
  const volumes: Record<string, string[]> = {};
  for (const pool of new Set(desired.volumes.map((v) => v.pool))) {
    volumes[pool] = (await incus.listVolumes(pool)).map((v) => v.name);
  }
  const local = desired.image.server === null && !desired.image.local_registry;
  const images = local ? await incus.listImages() : undefined;
  return { plan: diff(desired, { actual, volumes, images, pruneDevices }), images };
}

/** Takes the sandbox's lock, reporting once when another isb holds it. */
export function lockSandbox(
  rt: Runtime,
  incus: IncusClient,
  name: string,
  progress?: (line: string) => void,
): Promise<NameLock> {
  return acquireLock({
    lockDir: rt.lockDir,
    project: incus.project,
    name,
    waitMs: rt.lockWaitMs,
    clock: rt.clock,
    onWait: (path) => progress?.(`${name}: waiting for another isb holding ${path}`),
  });
}

function egressCtx(rt: Runtime, progress?: (line: string) => void): EgressContext {
  return { stateDir: rt.isbStateDir, env: rt.env, wallNow: rt.wallNow, clock: rt.clock, progress };
}

/** How {@link applyDesired} and {@link ensureDesired} apply a sandbox. */
export interface ApplyOptions {
  /** Run the readiness checks after applying. */
  waitReady: boolean;
  /** Remove instance-local devices the spec does not mention. */
  pruneDevices: boolean;
  /** Receives progress lines. */
  progress?: ((line: string) => void) | undefined;
}

/** Plan + apply + ports + (optionally) readiness, under the caller's lock. */
export async function applyDesired(
  rt: Runtime,
  incus: IncusClient,
  desired: Desired,
  opts: ApplyOptions,
): Promise<ApplyReport> {
  const { plan, images } = await planDesired(incus, desired, opts.pruneDevices);
  const report = await applyPlan(
    {
      incus,
      clock: rt.clock,
      createTimeoutMs: rt.createTimeoutMs,
      images,
      egress: egressCtx(rt),
      progress: opts.progress,
      ...(rt.inUse ? { inUse: rt.inUse } : {}),
    },
    desired,
    plan,
  );
  // The settled listen address of every searched port, added now or already in range.
  const searched = Object.entries(desired.devices).filter(([, d]) => d.search);
  if (searched.length > 0) {
    const inst = await findInstance(incus, desired.name);
    for (const [dev] of searched) {
      const listen = inst?.devices?.[dev]?.listen;
      if (listen !== undefined) report.ports[dev] = listen;
    }
  }
  if (report.restart_needed.length > 0) {
    opts.progress?.(restartLine(desired.name, report.restart_needed));
  }
  if (opts.waitReady) {
    await waitReady(incus, desired.name, {
      checks: desired.ready,
      timeoutMs: desired.readyTimeoutMs,
      exec: desired.exec,
      clock: rt.clock,
    });
    if (desired.egress) await afterReady(incus, desired.egress, egressCtx(rt, opts.progress));
  }
  return report;
}

/** `sandbox.ensure` for an already resolved sandbox: lock, plan, apply, readiness. */
export async function ensureDesired(
  rt: Runtime,
  incus: IncusClient,
  desired: Desired,
  opts: ApplyOptions,
): Promise<ApplyReport> {
  const lock = await lockSandbox(rt, incus, desired.name, opts.progress);
  try {
    return await applyDesired(rt, incus, desired, opts);
  } finally {
    lock.release();
  }
}

/** `sandbox.create`: like ensure, but an existing instance is `already_exists`. */
export async function createSandbox(
  rt: Runtime,
  p: SpecParams,
  o: CallOptions,
): Promise<SandboxInfo> {
  const incus = clientFor(rt, o.project);
  const desired = await resolveSpec(rt, incus, p);
  const lock = await lockSandbox(rt, incus, desired.name, o.progress);
  try {
    if (await findInstance(incus, desired.name)) {
      throw new IsbError("already_exists", `sandbox ${desired.name} already exists`);
    }
    await applyDesired(rt, incus, desired, {
      waitReady: p.wait_ready ?? true,
      pruneDevices: p.prune_devices ?? false,
      progress: o.progress,
    });
  } finally {
    lock.release();
  }
  return sandboxInfo(await mustFindInstance(incus, desired.name));
}

/** `sandbox.ensure`: `{info, report}`. */
export async function ensureSandbox(
  rt: Runtime,
  p: SpecParams,
  o: CallOptions,
): Promise<{ info: SandboxInfo; report: ApplyReport }> {
  const incus = clientFor(rt, o.project);
  const desired = await resolveSpec(rt, incus, p);
  const report = await ensureDesired(rt, incus, desired, {
    waitReady: p.wait_ready ?? true,
    pruneDevices: p.prune_devices ?? false,
    progress: o.progress,
  });
  return { info: sandboxInfo(await mustFindInstance(incus, desired.name)), report };
}

/** `sandbox.remove`: a running one needs `force`; the egress plumbing goes too. */
export async function removeSandbox(
  rt: Runtime,
  p: { name: string; force?: boolean | undefined },
  o: CallOptions,
): Promise<void> {
  const incus = clientFor(rt, o.project);
  const inst = await mustFindInstance(incus, p.name);
  if (inst.status?.toLowerCase() === "running" && !p.force) {
    throw new IsbError("invalid", `${p.name} is running; stop it first or force removal`);
  }
  await forceDelete(incus, p.name, rt.clock);
  await teardownEgress(incus, { instance: p.name, stateDir: rt.isbStateDir }).catch((e) =>
    log.warn("egress teardown failed", { sandbox: p.name, error: String(e) })
  );
}
