/**
 * `compose.load|up|plan|down` (isb-rpc.md §5.8): every call reloads the files (through the
 * engine's injected file functions), picks the Incus project (the request's or the server's
 * if not `default`, else the file's `incus_project`), and walks the services in dependency
 * order: `up` ensures each (with the compose-only extras of `extras.ts`), `plan`
 * diffs each, `down` removes exactly the named ones, dependents first.
 *
 * @module
 */

import { IsbError, isNotFound } from "../../errors.ts";
import type { ComposeFs } from "./fs.ts";
import type { IncusClient } from "../../incus/mod.ts";
import {
  type ComposeLoadResult,
  composeLoadResult,
  type ComposeProject,
  filesDisplay,
  loadCompose,
  projectServices,
  projectServicesExact,
} from "./load.ts";
import {
  gatherSecretValues,
  installUnit,
  pushSecretFiles,
  unitName,
  usedSecretKeys,
  waitHealthy,
  waitSystemd,
} from "./extras.ts";
import { poolFacts } from "../resolve/host_facts.ts";
import { type ApplyReport, isChange, type SandboxPlan } from "../plan/plan.ts";
import { isOci, parseImage } from "../resolve/image.ts";
import {
  type CallOptions,
  clientFor,
  ensureDesired,
  planDesired,
  removeSandbox,
  resolveSpec,
  type Runtime,
} from "../lifecycle/sandbox_ops.ts";
import { pickPool, removeVolume } from "../instances/volume.ts";

/** The params every compose method takes (one struct, as in isb). */
export interface ComposeParams {
  /** Compose files in merge order (default: isb.yaml + override in the cwd). */
  files?: string[] | undefined;
  /** dotenv files (default: .env beside the first file). */
  env_files?: string[] | undefined;
  /** Overrides the project name. */
  project_name?: string | undefined;
  /** Variables that win over the environment. */
  vars?: Record<string, string> | undefined;
  /** Services to act on (up/plan add their dependencies). */
  services?: string[] | undefined;
  /** Readiness after each ensure (default true). */
  wait_ready?: boolean | undefined;
  /** Remove devices the spec does not mention. */
  prune_devices?: boolean | undefined;
  /** `down`: also delete the file's volumes. */
  volumes?: boolean | undefined;
}

/** Loads the project the params name. */
export function loadProject(rt: Runtime, fs: ComposeFs, p: ComposeParams): Promise<ComposeProject> {
  return loadCompose({
    cwd: rt.cwd,
    ...(p.files && p.files.length > 0 ? { files: p.files } : {}),
    ...(p.env_files && p.env_files.length > 0 ? { envFiles: p.env_files } : {}),
    ...(p.project_name !== undefined ? { projectName: p.project_name } : {}),
    ...(p.vars ? { vars: p.vars } : {}),
    env: (k) => rt.env[k],
    readTextFile: fs.readTextFile,
    isFile: fs.isFile,
    realPath: fs.realPath,
  });
}

/** `compose.load`. */
export async function composeLoad(
  rt: Runtime,
  fs: ComposeFs,
  p: ComposeParams,
): Promise<ComposeLoadResult> {
  return composeLoadResult(await loadProject(rt, fs, p));
}

function projectClient(rt: Runtime, proj: ComposeProject, o: CallOptions): IncusClient {
  const c = clientFor(rt, o.project);
  return c.project === "" && proj.file.incus_project ? c.withProject(proj.file.incus_project) : c;
}

function serviceName(proj: ComposeProject, s: string): string {
  return proj.file.services[s]!.container_name ?? s;
}

/** `compose.plan`: one plan per selected service, in dependency order. */
export async function composePlan(
  rt: Runtime,
  fs: ComposeFs,
  p: ComposeParams,
  o: CallOptions,
): Promise<SandboxPlan[]> {
  const proj = await loadProject(rt, fs, p);
  const incus = projectClient(rt, proj, o);
  const out: SandboxPlan[] = [];
  for (const s of projectServices(proj, p.services)) {
    const desired = await resolveSpec(rt, incus, {
      spec: proj.file.services[s]!,
      volumes: proj.file.volumes ?? {},
      baseDir: proj.baseDir,
    });
    out.push((await planDesired(incus, desired, p.prune_devices ?? false)).plan);
  }
  return out;
}

function checkHealthyDeps(proj: ComposeProject, selected: string[]): Set<string> {
  const needed = new Set<string>();
  for (const s of selected) {
    for (const [dep, d] of Object.entries(proj.file.services[s]!.depends_on ?? {})) {
      if (d.condition === "service_healthy") needed.add(dep);
    }
  }
  for (const dep of needed) {
    const spec = proj.file.services[dep]!;
    const h = spec.healthcheck;
    if (!h || h.disable || (h.test ?? [])[0] === "NONE") {
      throw new IsbError(
        "invalid",
        `a service depends on "${dep}" being healthy, but "${dep}" has no healthcheck`,
      );
    }
    const longRunning = spec.restart !== undefined && spec.restart !== "no";
    if (spec.command && !longRunning && !isOci(parseImage(spec.image))) {
      throw new IsbError(
        "invalid",
        `a service depends on "${dep}" being healthy, but its command only runs once every ` +
          `service is up; set restart on "${dep}" so isb supervises it`,
      );
    }
  }
  return needed;
}

/** `compose.up`: `[{service, report}]` in dependency order. */
export async function composeUp(
  rt: Runtime,
  fs: ComposeFs,
  p: ComposeParams,
  o: CallOptions,
): Promise<{ service: string; report: ApplyReport }[]> {
  const proj = await loadProject(rt, fs, p);
  const incus = projectClient(rt, proj, o);
  const selected = projectServices(proj, p.services);
  const healthy = checkHealthyDeps(proj, selected);
  for (const s of selected) {
    const n = Number(proj.file.services[s]!.deploy?.replicas ?? "1");
    if (n > 1) {
      throw new IsbError(
        "invalid",
        `service "${s}" asks for ${n} replicas; isb up runs one, \`isb stack deploy\` runs replicas behind a load balancer`,
      );
    }
  }
  const values = selected.some((s) => usedSecretKeys(proj.file.services[s]!).length > 0)
    ? await gatherSecretValues(proj.file, selected, {
      baseDir: proj.baseDir,
      lookup: proj.lookup,
      readTextFile: fs.readTextFile,
      realPath: fs.realPath,
      protectedPaths: rt.protectedPaths,
    })
    : {};
  const out: { service: string; report: ApplyReport }[] = [];
  for (const s of selected) {
    const spec = proj.file.services[s]!;
    const desired = await resolveSpec(rt, incus, {
      spec,
      volumes: proj.file.volumes ?? {},
      baseDir: proj.baseDir,
      secretValues: values,
    });
    const report = await ensureDesired(rt, incus, desired, {
      waitReady: p.wait_ready ?? true,
      pruneDevices: p.prune_devices ?? false,
      progress: o.progress,
    });
    if (!report.applied.some(isChange)) o.progress?.(`${desired.name}: up to date`);
    const oci = isOci(desired.image);
    if ((spec.secrets ?? []).length > 0 && !oci) await waitSystemd(incus, desired.name, rt.clock);
    if (await pushSecretFiles(incus, desired.name, spec, values) && oci) {
      await incus.restartInstance(desired.name, {
        step: `restart ${desired.name}`,
        timeoutSecs: 30,
      });
    }
    const longRunning = spec.restart !== undefined && spec.restart !== "no";
    if (longRunning && spec.command && !oci) {
      const changed = await installUnit(incus, desired.name, {
        service: s,
        spec,
        env: desired.exec.env ?? {},
        clock: rt.clock,
      });
      if (changed) o.progress?.(`${desired.name}: supervising command as ${unitName(s)}`);
    }
    if (healthy.has(s)) {
      await waitHealthy(incus, desired.name, {
        service: s,
        spec,
        clock: rt.clock,
        progress: o.progress,
      });
    }
    out.push({ service: s, report });
  }
  return out;
}

/** `compose.down`: removes the named sandboxes (dependents first), optionally the volumes. */
export async function composeDown(
  rt: Runtime,
  fs: ComposeFs,
  p: ComposeParams,
  o: CallOptions,
): Promise<null> {
  const proj = await loadProject(rt, fs, p);
  const incus = projectClient(rt, proj, o);
  for (const s of projectServicesExact(proj, p.services).reverse()) {
    const name = serviceName(proj, s);
    try {
      await removeSandbox(rt, { name, force: true }, { project: incus.project });
      o.progress?.(`${name}: deleted`);
    } catch (e) {
      if (!isNotFound(e)) throw e;
      o.progress?.(`${name}: not present`);
    }
  }
  if (!p.volumes) return null;
  if (p.services && p.services.length > 0) {
    o.progress?.("volumes kept: they are shared by the file; remove them with a full down");
    return null;
  }
  const pools = await poolFacts(incus);
  const defs = proj.file.volumes ?? {};
  const seen = new Map<string, [string, string]>();
  const volName = (key: string) => defs[key]?.name ?? key;
  for (const spec of Object.values(proj.file.services)) {
    const root = pickPool(pools, spec.storage);
    for (const m of spec.volumes ?? []) {
      if (m.type !== "volume") continue;
      const def = defs[m.source];
      if (m.external || def?.external) continue;
      const pool = m.pool && m.pool !== "auto"
        ? m.pool
        : def?.pool && def.pool !== "auto"
        ? def.pool
        : root;
      seen.set(`${pool}\0${volName(m.source)}`, [pool, volName(m.source)]);
    }
  }
  for (const [key, def] of Object.entries(defs)) {
    const v = volName(key);
    if (!def.external && ![...seen.values()].some(([, n]) => n === v)) {
      seen.set(`${pickPool(pools, def.pool)}\0${v}`, [pickPool(pools, def.pool), v]);
    }
  }
  for (const [pool, v] of [...seen.values()].sort()) {
    try {
      await removeVolume(incus, pool, v);
      o.progress?.(`volume ${v}: deleted`);
    } catch (e) {
      if (isNotFound(e)) continue;
      o.progress?.(`volume ${v}: kept (${e instanceof Error ? e.message : String(e)})`);
    }
  }
  return null;
}

export { filesDisplay };
