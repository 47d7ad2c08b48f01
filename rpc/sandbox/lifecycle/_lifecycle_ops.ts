/**
 * The name-taking lifecycle and device operations of the engine (isb-rpc.md §5.3): start,
 * stop, readiness, `add_port` and `remove_device`. Start, add_port and remove_device take
 * the sandbox's lock; a device already right is never touched.
 *
 * A clean stop that Incus reports as failed while the instance still runs is tried once
 * more: systemd ignores the shutdown signal until it has installed its handler, so a stop
 * sent right after a start (a `restart` just after `start`) is otherwise lost and only
 * fails at its deadline (docs/decisions.md).
 *
 * @module
 */

import { hasCode, IsbError } from "../../errors.ts";
import type { IncusClient } from "../../incus/mod.ts";
import { addDevice } from "../plan/apply.ts";
import {
  findInstance,
  mustFindInstance,
  retryOnce,
  startInstance,
  stopInstance,
} from "../instances/instance.ts";
import { deviceMatches } from "../plan/plan.ts";
import { addPortSearching } from "../plan/ports.ts";
import { type ReadyCheck, waitReady } from "../instances/ready.ts";
import { hostPathContext, portDevice } from "../resolve/devices.ts";
import type { HostFacts } from "../resolve/host.ts";
import {
  type CallOptions,
  clientFor,
  hostFacts,
  lockSandbox,
  type Runtime,
} from "./sandbox_ops.ts";

/** Host facts of a port without a unix socket (nothing of them is read then). */
const NO_FACTS: HostFacts = {
  pools: [],
  apiExtensions: [],
  serverDriver: "",
  home: "",
  uid: 0,
  gid: 0,
  subuid: undefined,
  subgid: undefined,
  hostPathMap: undefined,
  realPath: () => undefined,
};
import type { ExecDefaults, PortSpec } from "../spec/spec.ts";

/** `sandbox.start`: no-op when running; else lock, start (retried once), wait for running. */
export async function startSandbox(rt: Runtime, name: string, o: CallOptions): Promise<void> {
  const incus = clientFor(rt, o.project);
  const inst = await mustFindInstance(incus, name);
  if (inst.status?.toLowerCase() === "running") return;
  const lock = await lockSandbox(rt, incus, name, o.progress);
  try {
    await retryOnce(o.progress, () => startInstance(incus, name));
  } finally {
    lock.release();
  }
  await waitReady(incus, name, { checks: ["running"], timeoutMs: 60_000, clock: rt.clock });
}

/** `sandbox.stop`: no-op when stopped. */
export async function stopSandbox(
  rt: Runtime,
  p: { name: string; force?: boolean | undefined; timeoutMs?: number | undefined },
  o: CallOptions,
): Promise<void> {
  const incus = clientFor(rt, o.project);
  const inst = await mustFindInstance(incus, p.name);
  if (inst.status?.toLowerCase() === "stopped") return;
  const opts = { force: p.force ?? false, timeoutMs: p.timeoutMs ?? 30_000 };
  try {
    await stopInstance(incus, p.name, opts);
  } catch (e) {
    if (opts.force || !hasCode(e, "operation_failed")) throw e;
    const now = await findInstance(incus, p.name).catch(() => undefined);
    if (now?.status?.toLowerCase() !== "running") throw e;
    o.progress?.(`${e.message}; retrying once`);
    await stopInstance(incus, p.name, opts);
  }
}

/** `sandbox.wait_ready`. */
export async function waitSandboxReady(
  rt: Runtime,
  p: {
    name: string;
    ready?: ReadyCheck[] | undefined;
    timeoutMs?: number | undefined;
    exec?: ExecDefaults | undefined;
  },
  o: CallOptions,
): Promise<void> {
  await waitReady(clientFor(rt, o.project), p.name, {
    checks: p.ready ?? ["running"],
    timeoutMs: p.timeoutMs ?? 60_000,
    exec: p.exec,
    clock: rt.clock,
  });
}

/** `sandbox.add_port`: a matching device is left alone; else (re)added, searching if asked. */
export async function addPort(
  rt: Runtime,
  p: { name: string; port: PortSpec },
  o: CallOptions,
): Promise<{ listen: string }> {
  const incus = clientFor(rt, o.project);
  const first = await mustFindInstance(incus, p.name);
  // a unix socket on the host's end is a host path: checked like a spec's (_raw_rules.ts)
  const unix = `${p.port.listen} ${p.port.connect}`.includes("unix:");
  const host = unix ? await hostFacts(rt, incus) : { ...NO_FACTS, home: rt.env.HOME ?? "" };
  const paths = hostPathContext({ baseDir: rt.cwd, host });
  const vm = first.type === "virtual-machine";
  const [dev, want] = portDevice(p.port, { name: p.name, vm, paths });
  const lock = await lockSandbox(rt, incus, p.name, o.progress);
  try {
    const have = (await mustFindInstance(incus, p.name)).devices?.[dev];
    if (have && deviceMatches(want, have)) return { listen: have.listen ?? "" };
    if (have) await removeDeviceUnlocked(incus, p.name, dev);
    if (want.search) {
      const listen = await addPortSearching({
        name: p.name,
        device: dev,
        props: want.props,
        search: want.search,
        add: (props) => addDevice(incus, p.name, dev, props),
        ...(rt.inUse ? { inUse: rt.inUse } : {}),
      });
      return { listen };
    }
    await addDevice(incus, p.name, dev, want.props);
    return { listen: want.props.listen ?? "" };
  } finally {
    lock.release();
  }
}

async function removeDeviceUnlocked(incus: IncusClient, name: string, device: string) {
  if (device === "root") throw new IsbError("invalid", "refusing to remove the root disk");
  let found = false;
  await incus.updateInstance(name, (i) => {
    found = Object.hasOwn(i.devices ?? {}, device);
    if (found) delete i.devices[device];
  }, { step: `remove device ${device}` });
  return found;
}

/** `sandbox.remove_device`: `{removed}`; `root` is refused. */
export async function removeDevice(
  rt: Runtime,
  p: { name: string; device: string },
  o: CallOptions,
): Promise<{ removed: boolean }> {
  const incus = clientFor(rt, o.project);
  await mustFindInstance(incus, p.name);
  const lock = await lockSandbox(rt, incus, p.name, o.progress);
  try {
    return { removed: await removeDeviceUnlocked(incus, p.name, p.device) };
  } finally {
    lock.release();
  }
}
