/**
 * The instance lifecycle tools: `adopt_instance`, `start_instance`, `stop_instance`,
 * `keep_instance`, `destroy_instance` (§2.4, §2.14-2.17). Each checks holding against the
 * instance's own stamp first (one read); starts and stops go through the same functions as
 * `isx start` / `isx stop`, so an MCP start gets a fresh instance secret like any other.
 * Adoption, the one that crosses sessions, is `_adopt.ts`.
 *
 * @module
 */

import * as z from "zod";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { destroyIsxInstance, startIsxInstance, stopIsxInstance } from "../instances/lifecycle.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "../session/holding.ts";
import type { Session } from "../session/mod.ts";
import { InstanceName, TaskId, tool } from "./def.ts";
import { adopt } from "./_adopt.ts";
import { adoptTasks, preflight } from "../session/adoption.ts";

const Named = z.strictObject({ instance: InstanceName });

function runningTasks(s: Session, name: string): string[] {
  return [...s.tasks.values()].filter((t) => t.instance === name && t.state === "running")
    .map((t) => t.id);
}

const start = tool({
  name: "start_instance",
  description:
    "Start a stopped instance this session holds (with a fresh instance secret, as isx start does).",
  input: () => Named,
  output: () =>
    z.strictObject({
      instance: z.string(),
      already: z.boolean(),
      tasks: z.array(TaskId),
      warning: z.string().optional(),
    }),
  hints: { readOnly: false, destructive: false, idempotent: true },
  async run(args, { session: s }) {
    const inst = await s.requireHeld(args.instance);
    if (inst.status === "Running") {
      return { structured: { instance: args.instance, already: true, tasks: [] } };
    }
    if (inst.status !== "Stopped") {
      throw new RefusalError(
        "wrong_state",
        `instance "${args.instance}" is ${inst.status}; ask the user to look at it (isx shell ${args.instance})`,
      );
    }
    const health = await preflight(s, { action: `start "${args.instance}"` });
    await startIsxInstance(s.incus, args.instance);
    await s.deps.checks?.repairCa(
      args.instance,
      health,
      readStamps(inst.config)[STAMP.caFingerprint],
    );
    const t = await adoptTasks(s, args.instance);
    return {
      structured: {
        instance: args.instance,
        already: false,
        tasks: t.ids,
        ...(t.warning ? { warning: t.warning } : {}),
      },
      audit: "started",
    };
  },
});

const stop = tool({
  name: "stop_instance",
  description:
    "Stop an instance this session holds. Refused while tasks run unless force, which cancels them first.",
  input: () => z.strictObject({ instance: InstanceName, force: z.boolean().optional() }),
  output: () =>
    z.strictObject({
      instance: z.string(),
      already: z.boolean(),
      cancelled_tasks: z.array(TaskId),
    }),
  hints: { readOnly: false, destructive: false, idempotent: true },
  async run(args, { session: s }) {
    const inst = await s.requireHeld(args.instance);
    if (inst.status === "Stopped") {
      return { structured: { instance: args.instance, already: true, cancelled_tasks: [] } };
    }
    const running = runningTasks(s, args.instance);
    if (running.length && !args.force) {
      throw new RefusalError(
        "wrong_state",
        `instance "${args.instance}" has running tasks (${
          running.join(", ")
        }); wait for them, cancel_task them, or pass force: true`,
      );
    }
    if (running.length) await s.deps.tasks!.cancel(s, args.instance, running);
    await stopIsxInstance(s.incus, args.instance);
    const audit = running.length ? `stopped, cancelled ${running.length} task(s)` : "stopped";
    return {
      structured: { instance: args.instance, already: false, cancelled_tasks: running },
      audit,
    };
  },
});

const keep = tool({
  name: "keep_instance",
  description:
    "Hand an instance to the user: it is never reaped, never adoptable, and no longer counts against max_instances. You may keep using it until this session ends.",
  input: () => Named,
  output: () => z.strictObject({ instance: z.string() }),
  hints: { readOnly: false, destructive: false, idempotent: true },
  async run(args, { session: s }) {
    await s.requireHeld(args.instance);
    const at = new Date(s.deps.now()).toISOString();
    await s.incus.updateInstance(args.instance, withStamps({ [MCP_STAMP.kept]: at }), {
      step: `keep ${args.instance}`,
    });
    const held = s.held.get(args.instance);
    if (held) held.kept = true;
    return {
      structured: { instance: args.instance },
      text:
        `Kept "${args.instance}" for the user: they can open it with isx shell ${args.instance}.`,
      audit: "kept",
    };
  },
});

const destroy = tool({
  name: "destroy_instance",
  description:
    "Destroy an instance this session holds, with everything in it. already: true when it was gone.",
  input: () => Named,
  output: () => z.strictObject({ instance: z.string(), already: z.boolean() }),
  hints: { readOnly: false, destructive: true, idempotent: true },
  async run(args, { session: s }) {
    const held = s.held.get(args.instance);
    if (held?.state === "creating") {
      throw new RefusalError(
        "wrong_state",
        `instance "${args.instance}" is still being created; destroy it once create_instance answered`,
      );
    }
    const exists = await s.incus.getInstance(args.instance).then(() => true, (e) => {
      if (isNotFound(e)) return false;
      throw e;
    });
    if (!exists) {
      s.forget(args.instance, "lost");
      return { structured: { instance: args.instance, already: true }, audit: "already-gone" };
    }
    await s.requireHeld(args.instance);
    await destroyIsxInstance(s.incus, args.instance);
    s.forget(args.instance, "lost");
    return { structured: { instance: args.instance, already: false }, audit: "destroyed" };
  },
});

/** adopt, start, stop, keep, destroy. */
export const lifecycleTools = [adopt, start, stop, keep, destroy];
