/**
 * Instances: list, get (with ETag), create (from an image or a copy), update guarded by
 * If-Match, state changes, delete and runtime state. Small functions in the Incus Go
 * client's style; every mutation names its `step` and waits for its operation.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { type IncusConn, seg } from "./conn.ts";
import { isPreconditionFailed } from "./envelope.ts";
import { ifMatch, type MutationOptions, waitIfAsync } from "./_mutate.ts";
import { waitOperation } from "./operations.ts";
import type {
  Instance,
  InstancePut,
  InstancesPost,
  InstanceState,
  Operation,
  StatePut,
  Versioned,
} from "./types.ts";

/** Options of {@link createInstance}. */
export interface CreateOptions extends MutationOptions {
  /** Cluster member to create the instance on. */
  target?: string;
}

/** Options of {@link stopInstance}. */
export interface StopOptions extends MutationOptions {
  /** Seconds incusd waits for a clean shutdown before failing (default 30). */
  timeoutSecs?: number;
  /** Kill instead of a clean shutdown. */
  force?: boolean;
}

const path = (name: string) => `/1.0/instances/${seg(name)}`;

/** Lists instances with their full configuration (`recursion=1`). */
export async function listInstances(conn: IncusConn): Promise<Instance[]> {
  const r = await conn.sync<Instance[]>("GET", "/1.0/instances", { query: { recursion: 1 } });
  return r.metadata ?? [];
}

/** Fetches one instance and its ETag; a missing one is `not_found`. */
export async function getInstance(conn: IncusConn, name: string): Promise<Versioned<Instance>> {
  const r = await conn.sync<Instance>("GET", path(name));
  return { value: r.metadata, etag: r.etag };
}

/** Fetches the runtime state (status, pid, addresses). */
export async function getInstanceState(conn: IncusConn, name: string): Promise<InstanceState> {
  return (await conn.sync<InstanceState>("GET", `${path(name)}/state`)).metadata;
}

export type { MutationOptions };

/** Creates an instance (image or copy source) and waits for it. */
export async function createInstance(
  conn: IncusConn,
  req: InstancesPost,
  opts: CreateOptions,
): Promise<Operation> {
  const body = { type: "container", ...req };
  const target = opts.target || conn.target; // the client's --target unless the call names one
  const op = await conn.async("POST", "/1.0/instances", { body, ...(target ? { target } : {}) });
  return await waitOperation(conn, op, {
    step: opts.step,
    deadlineMs: opts.deadlineMs ?? conn.timeouts.createMs,
  });
}

/** Replaces the writable config; with `etag`, a concurrent change fails with HTTP 412. */
export async function putInstance(
  conn: IncusConn,
  name: string,
  put: InstancePut,
  opts: MutationOptions & { etag?: string | undefined },
): Promise<void> {
  const r = await conn.call("PUT", path(name), { body: put, headers: ifMatch(opts.etag) });
  await waitIfAsync(conn, r, opts);
}

/** Read-modify-write with If-Match, retried up to 5 times on a concurrent change. */
export async function updateInstance(
  conn: IncusConn,
  name: string,
  mutate: (i: Instance) => InstancePut | Instance | void,
  opts: MutationOptions,
): Promise<void> {
  for (let attempt = 1;; attempt++) {
    const { value, etag } = await getInstance(conn, name);
    const next = mutate(value) ?? value;
    try {
      return await putInstance(conn, name, toPut(next), { ...opts, etag });
    } catch (e) {
      if (!isPreconditionFailed(e) || attempt >= 5) throw e;
    }
  }
}

/** The writable part of an instance. */
export function toPut(i: InstancePut | Instance): InstancePut {
  const { architecture, config, devices, ephemeral, profiles, stateful, description } = i;
  return { architecture, config, devices, ephemeral, profiles, stateful, description };
}

/** Changes the state (start/stop/restart/freeze/unfreeze) and waits. */
export async function setInstanceState(
  conn: IncusConn,
  name: string,
  state: StatePut,
  opts: MutationOptions,
): Promise<void> {
  const op = await conn.async("PUT", `${path(name)}/state`, { body: state });
  await waitOperation(conn, op, opts);
}

/** Starts an instance. */
export function startInstance(
  conn: IncusConn,
  name: string,
  opts: MutationOptions,
): Promise<void> {
  return setInstanceState(conn, name, { action: "start" }, opts);
}

/** Stops an instance: a clean shutdown bounded by `timeoutSecs`, or a kill with `force`. */
export function stopInstance(conn: IncusConn, name: string, opts: StopOptions): Promise<void> {
  const state: StatePut = { action: "stop", timeout: opts.timeoutSecs ?? 30 };
  if (opts.force) state.force = true;
  return setInstanceState(conn, name, state, opts);
}

/** Stops cleanly within `timeoutSecs` (default 10), then forcibly if that failed. */
export async function stopInstanceOrKill(
  conn: IncusConn,
  name: string,
  opts: StopOptions,
): Promise<void> {
  const timeoutSecs = opts.timeoutSecs ?? 10;
  const deadlineMs = opts.deadlineMs ?? (timeoutSecs + 15) * 1000;
  try {
    return await stopInstance(conn, name, { step: opts.step, timeoutSecs, deadlineMs });
  } catch (e) {
    if (!(e instanceof IsbError) || e.code === "not_found" || e.code === "connect") throw e;
  }
  try {
    await stopInstance(conn, name, { step: `${opts.step} (forced)`, force: true });
  } catch (e) {
    // the clean stop may have finished meanwhile ("already stopped")
    const state = await getInstanceState(conn, name).catch(() => undefined);
    if (state?.status !== "Stopped") throw e;
  }
}

/** Restarts an instance. */
export function restartInstance(
  conn: IncusConn,
  name: string,
  opts: StopOptions,
): Promise<void> {
  const state: StatePut = { action: "restart", timeout: opts.timeoutSecs ?? 30 };
  if (opts.force) state.force = true;
  return setInstanceState(conn, name, state, opts);
}

/** Deletes a stopped instance and waits. */
export async function deleteInstance(
  conn: IncusConn,
  name: string,
  opts: MutationOptions,
): Promise<void> {
  const op = await conn.async("DELETE", path(name));
  await waitOperation(conn, op, opts);
}
