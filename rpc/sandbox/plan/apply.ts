/**
 * Applying a plan (isb-rpc.md §9.2): actions become Incus calls, in plan order.
 *
 * `set_config`/`add_device`/`replace_device`/`remove_device` are batched and flushed as ONE
 * If-Match read-modify-write before the next other action and at the end, so a stopped
 * instance gets its devices before it starts, and a concurrent change by another tool is
 * never overwritten (a 412 re-reads and retries, in the client). Each step that times out is
 * retried once (`<err>; retrying once`). Egress plumbing is prepared before any action.
 *
 * Create carries a fresh `user.isb.create-token`: on an operation timeout the operation is
 * given 30 s to settle (kept if it finished); otherwise, and after other failures (not a
 * conflict), a half-created instance is deleted only if it carries THIS call's token, and a
 * timed-out create is retried once.
 *
 * @module
 */

import { IsbError, isConflict, isTimeout } from "../../errors.ts";
import type { Image, IncusClient, Instance } from "../../incus/mod.ts";
import { beforeApply, type EgressContext } from "../egress/egress.ts";
import { findInstance, forceDelete, retryOnce, startInstance } from "../instances/instance.ts";
import type { Clock } from "../../clock.ts";
import { applyOwnerFix } from "./_owner.ts";
import {
  type Action,
  type ApplyReport,
  buildReport,
  renderAction,
  type SandboxPlan,
} from "./plan.ts";
import { addPortSearching } from "./ports.ts";
import { waitReady } from "../instances/ready.ts";
import type { Desired } from "../resolve/resolve.ts";
import { findLocalImage, imageSourceBody, missingLocalImage } from "../resolve/image.ts";
import { ensureVolume } from "../instances/volume.ts";

/** Config key recording which call created an instance. */
export const CREATE_TOKEN_KEY = "user.isb.create-token";

/** What applying needs besides the plan. */
export interface ApplyContext {
  /** The client scoped to the sandbox's project. */
  incus: IncusClient;
  clock: Clock;
  /** Deadline of the create operation. */
  createTimeoutMs: number;
  /** Local images (the plan's view), for the create source. */
  images?: readonly Image[] | undefined;
  /** Egress: state dir, environment, wall clock. */
  egress: Omit<EgressContext, "progress">;
  progress?: ((line: string) => void) | undefined;
  /** Probe for taken TCP ports (tests). */
  inUse?: (host: string, port: number) => boolean;
}

const BATCHED = new Set(["set_config", "add_device", "replace_device", "remove_device"]);

/** Applies `plan`; returns what was done. */
export async function applyPlan(
  ctx: ApplyContext,
  desired: Desired,
  plan: SandboxPlan,
): Promise<ApplyReport> {
  const { incus } = ctx;
  const name = desired.name;
  const say = (line: string) => ctx.progress?.(`${name}: ${line}`);
  const applied: Action[] = [];
  const ports: Record<string, string> = {};
  let created = false;
  let pending: Action[] = [];
  if (desired.egress) {
    await beforeApply(incus, desired.egress, { ...ctx.egress, progress: ctx.progress });
  }
  const flush = async () => {
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    for (const a of batch) say(renderAction(a));
    await retryOnce(
      ctx.progress,
      () =>
        incus.updateInstance(name, (i) => mutate(i, batch, desired), { step: `update ${name}` }),
    );
    applied.push(...batch);
  };
  for (const action of plan.actions) {
    if (BATCHED.has(action.action)) {
      pending.push(action);
      continue;
    }
    await flush();
    switch (action.action) {
      case "note":
        say(`note: ${action.message}`);
        break;
      case "create_volume":
        say(`creating volume ${action.volume} on ${action.pool}`);
        await retryOnce(
          ctx.progress,
          () => ensureVolume(incus, action.pool, { name: action.volume, config: action.config }),
        );
        break;
      case "create_instance":
        say(`creating from ${desired.image.spec}`);
        await createInstance(ctx, desired);
        created = true;
        break;
      case "start_instance":
        say("starting");
        await retryOnce(ctx.progress, () => startInstance(incus, name));
        break;
      case "add_port": {
        const listen = await addPortSearching({
          name,
          device: action.device,
          props: action.props,
          search: action.search,
          add: (props) => addDevice(incus, name, action.device, props),
          ...(ctx.inUse ? { inUse: ctx.inUse } : {}),
        });
        say(`port ${action.device} listening on ${listen}`);
        ports[action.device] = listen;
        break;
      }
      case "fix_owner":
        if (desired.instance_type === "virtual-machine") {
          await waitReady(incus, name, {
            checks: ["agent"],
            timeoutMs: desired.readyTimeoutMs,
            clock: ctx.clock,
          });
        }
        if (await applyOwnerFix(incus, name, action)) say(renderAction(action));
        else say(`${action.path} came seeded from the image; owner left as is`);
        break;
    }
    applied.push(action);
  }
  await flush();
  return buildReport(name, { created, applied, ports });
}

/** Applies a batch of config/device actions to an instance read under its ETag. */
function mutate(i: Instance, batch: readonly Action[], desired: Desired): Instance {
  i.config ??= {};
  i.devices ??= {};
  for (const a of batch) {
    switch (a.action) {
      case "set_config":
        // A secret's action carries a placeholder; the value comes from the desired config.
        i.config[a.key] = a.secret ? desired.config[a.key] ?? a.to : a.to;
        break;
      case "add_device":
        i.devices[a.device] = { ...a.props };
        break;
      case "replace_device":
        delete i.devices[a.replaces];
        i.devices[a.device] = { ...a.to };
        break;
      case "remove_device":
        delete i.devices[a.device];
        break;
    }
  }
  return i;
}

/** Adds (or overwrites) one device under If-Match. */
export function addDevice(
  incus: IncusClient,
  name: string,
  device: string,
  props: Record<string, string>,
): Promise<void> {
  return incus.updateInstance(name, (i) => {
    i.devices = { ...i.devices, [device]: { ...props } };
  }, { step: `add port ${device}` });
}

function randomToken(): string {
  const b = crypto.getRandomValues(new Uint8Array(12));
  return Array.from(b).map((x) => x.toString(16).padStart(2, "0")).join("") +
    (Date.now() & 0xffff).toString(16);
}

async function createInstance(ctx: ApplyContext, desired: Desired): Promise<void> {
  const { incus } = ctx;
  const name = desired.name;
  const say = (line: string) => ctx.progress?.(line);
  let fingerprint: string | undefined;
  if (desired.image.server === null) {
    const images = ctx.images ?? await incus.listImages();
    const found = findLocalImage(images, desired.image.alias);
    if (!found) throw missingLocalImage(desired.image.alias, images);
    fingerprint = found.fingerprint;
  }
  const step = `create instance ${name}`;
  const devices = Object.fromEntries(
    Object.entries(desired.devices).filter(([, d]) => !d.search).map((
      [k, d],
    ) => [k, { ...d.props }]),
  );
  let last: unknown;
  for (let attempt = 0; attempt < 2; attempt++) {
    const token = randomToken();
    try {
      await incus.createInstance({
        name,
        type: desired.instance_type,
        source: imageSourceBody(desired.image, fingerprint),
        config: { ...desired.config, [CREATE_TOKEN_KEY]: token },
        devices,
        profiles: [...desired.profiles],
      }, { step, deadlineMs: ctx.createTimeoutMs });
      return;
    } catch (e) {
      if (!isTimeout(e)) {
        // A failed create may still have left a stub behind.
        if (!isConflict(e)) await cleanupHalfCreated(ctx, name, token).catch(() => {});
        throw e;
      }
      say(e.message);
      const op = e.data?.operation;
      if (e.code === "operation_timeout" && typeof op === "string") {
        // Most creates cannot be cancelled: let it settle so the cleanup sees what it did.
        const settled = await incus.waitOperation(op, { step, deadlineMs: 30_000 })
          .then(() => true, () => false);
        if (settled) {
          say(`${step}: finished late; keeping it`);
          return;
        }
      }
      try {
        await cleanupHalfCreated(ctx, name, token);
      } catch (ce) {
        say(`${name}: cleanup failed: ${ce instanceof Error ? ce.message : String(ce)}`);
        if (isConflict(ce)) throw e;
      }
      if (attempt === 0) say(`${step}: retrying once`);
      last = e;
    }
  }
  throw last;
}

/** Deletes a half-created instance only if it carries `token`; anything else is left. */
export async function cleanupHalfCreated(
  ctx: Pick<ApplyContext, "incus" | "clock" | "progress">,
  name: string,
  token: string,
): Promise<void> {
  const inst = await findInstance(ctx.incus, name);
  if (!inst) return;
  if (inst.config?.[CREATE_TOKEN_KEY] !== token) {
    ctx.progress?.(`${name}: exists but was not created by this call; leaving it alone`);
    throw new IsbError("already_exists", `sandbox ${name} already exists`);
  }
  ctx.progress?.(`${name}: removing half-created instance`);
  await forceDelete(ctx.incus, name, ctx.clock);
}
