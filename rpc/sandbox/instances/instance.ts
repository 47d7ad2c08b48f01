/**
 * Instance lifecycle of the engine (isb-rpc.md §5.3): the `info` shape, label filters,
 * start/stop with isb's rules (a start that lost a race to another starter still counts,
 * stop deadlines of max(120 s, timeout + 10 s)), and the forced delete that `remove`,
 * `prune`, `compose.down` and create cleanup share (force-stop for 5 s, then DELETE retried
 * every 2 s for up to 60 s while Incus refuses mid-transition; 404 means done).
 *
 * @module
 */

import { IsbError, isNotFound, isTimeout } from "../../errors.ts";
import type { Device, IncusClient, Instance } from "../../incus/mod.ts";
import type { Clock } from "../../clock.ts";
import { stringMap } from "./volume.ts";

/** A sandbox as the protocol lists it (§6.1). */
export interface SandboxInfo {
  /** Instance name. */
  name: string;
  /** Incus's status (`Running`, `Stopped`, …). */
  status: string;
  /** `container` or `virtual-machine`. */
  type: string;
  /** `user.*` keys without the prefix, never `user.isb.*`. */
  labels: Record<string, string>;
  /** All instance config, values as strings. */
  config: Record<string, string>;
  /** Instance-local devices. */
  devices: Record<string, Record<string, string>>;
  /** Profiles, in order. */
  profiles: string[];
  /** Creation time as Incus reports it. */
  created_at: string;
  /** Instance description. */
  description: string;
}

/** The protocol's view of an Incus instance. */
export function sandboxInfo(i: Instance): SandboxInfo {
  const config = stringMap(i.config);
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    // isb's own bookkeeping (user.isb.create-token, …) is not a label.
    if (k.startsWith("user.") && !k.startsWith("user.isb.")) labels[k.slice(5)] = v;
  }
  const devices: Record<string, Record<string, string>> = {};
  for (const [k, d] of Object.entries(i.devices ?? {})) devices[k] = stringMap(d as Device);
  return {
    name: i.name ?? "",
    status: i.status ?? "",
    type: i.type ?? "container",
    labels,
    config,
    devices,
    profiles: i.profiles ?? [],
    created_at: i.created_at ?? "",
    description: i.description ?? "",
  };
}

/** True when `info` carries every label filter (`key` present, `key=value` equal). */
export function matchesLabels(info: SandboxInfo, filters: readonly string[]): boolean {
  return filters.every((f) => {
    const eq = f.indexOf("=");
    const key = eq < 0 ? f : f.slice(0, eq);
    const have = info.labels[key];
    if (have === undefined) return false;
    return eq < 0 || have === f.slice(eq + 1);
  });
}

/** The instance, or undefined when Incus has none by that name. */
export async function findInstance(
  incus: IncusClient,
  name: string,
): Promise<Instance | undefined> {
  try {
    return (await incus.getInstance(name)).value;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** The instance; a missing one is `not_found` "sandbox N not found". */
export async function mustFindInstance(incus: IncusClient, name: string): Promise<Instance> {
  const i = await findInstance(incus, name);
  if (!i) throw new IsbError("not_found", `sandbox ${name} not found`);
  return i;
}

/** Instances whose labels match every filter, sorted by name. */
export async function listSandboxes(
  incus: IncusClient,
  labels: readonly string[] = [],
): Promise<SandboxInfo[]> {
  const all = (await incus.listInstances()).map(sandboxInfo);
  return all.filter((i) => matchesLabels(i, labels))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const isRunning = (s: string | undefined) => s?.toLowerCase() === "running";

/** Runs `f`, and once more after a timeout (reporting the first failure). */
export async function retryOnce<T>(
  progress: ((line: string) => void) | undefined,
  f: () => Promise<T>,
): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (!isTimeout(e)) throw e;
    progress?.(`${e.message}; retrying once`);
    return await f();
  }
}

/** `PUT state {start, timeout 30}`; Running afterwards anyway counts as success. */
export async function startInstance(incus: IncusClient, name: string): Promise<void> {
  try {
    await incus.setInstanceState(name, { action: "start", timeout: 30 }, {
      step: `start ${name}`,
      deadlineMs: 120_000,
    });
  } catch (e) {
    const i = await findInstance(incus, name).catch(() => undefined);
    if (isRunning(i?.status)) return;
    throw e;
  }
}

/** Stops with `force` and a clean-shutdown `timeoutMs`; deadline max(120 s, timeout + 10 s). */
export async function stopInstance(
  incus: IncusClient,
  name: string,
  opts: { force: boolean; timeoutMs: number },
): Promise<void> {
  const secs = Math.max(1, Math.floor(opts.timeoutMs / 1000));
  await incus.setInstanceState(name, { action: "stop", force: opts.force, timeout: secs }, {
    step: `stop ${name}`,
    deadlineMs: Math.max(120_000, opts.timeoutMs + 10_000),
  });
}

/** Force-stops (if needed) and deletes, retrying while Incus refuses; 404 is done. */
export async function forceDelete(
  incus: IncusClient,
  name: string,
  clock: Clock,
): Promise<void> {
  const first = await findInstance(incus, name);
  if (!first) return;
  if (first.status?.toLowerCase() !== "stopped") {
    await stopInstance(incus, name, { force: true, timeoutMs: 5000 }).catch(() => {});
  }
  const started = clock.now();
  while (true) {
    try {
      await incus.deleteInstance(name, { step: `delete ${name}` });
      return;
    } catch (e) {
      if (isNotFound(e)) return;
      if (isTimeout(e) || clock.now() - started >= 60_000) throw e;
      await clock.sleep(2000);
      const i = await findInstance(incus, name).catch(() => undefined);
      if (isRunning(i?.status)) {
        await stopInstance(incus, name, { force: true, timeoutMs: 5000 }).catch(() => {});
      }
    }
  }
}
