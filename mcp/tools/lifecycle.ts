/**
 * The instance lifecycle tools: `adopt_instance`, `start_instance`, `stop_instance`,
 * `keep_instance`, `destroy_instance` (§2.4, §2.14-2.17). Each checks holding against the
 * instance's own stamp first (one read); starts and stops go through the same functions as
 * `isx start` / `isx stop`, so an MCP start gets a fresh instance secret like any other.
 *
 * @module
 */

import { z } from "zod";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP, stampConfig } from "../host/stamps.ts";
import { destroyIsxInstance, startIsxInstance, stopIsxInstance } from "../instances/lifecycle.ts";
import { RefusalError } from "../errors.ts";
import { preflight } from "../session/create.ts";
import { takeOver } from "../session/take_over.ts";
import { MCP_STAMP } from "../session/holding.ts";
import type { Session } from "../session/mod.ts";
import { approvedTemplate } from "../session/templates.ts";
import { InstanceName, TaskId, tool } from "./def.ts";

const Named = z.strictObject({ instance: InstanceName });

function runningTasks(s: Session, name: string): string[] {
  return [...s.tasks.values()].filter((t) => t.instance === name && t.state === "running")
    .map((t) => t.id);
}

async function adoptTasks(s: Session, name: string): Promise<{ ids: string[]; warning?: string }> {
  const engine = s.deps.tasks;
  if (!engine) return { ids: [] };
  try {
    const ids = await engine.adopt(s, name);
    return { ids };
  } catch (e) {
    return {
      ids: [],
      warning: `the instance's task records could not be read: ${(e as Error).message}`,
    };
  }
}

/**
 * Restarts an orphan the sweep stopped as dormant (§2.4); the stamp goes only after a
 * successful start, so a failed wake-up (`unavailable`, still held) is retried by adopting
 * again.
 */
async function wakeDormant(s: Session, name: string, st: Record<string, string>): Promise<void> {
  const t0 = s.deps.now();
  try {
    const health = await preflight(s, { action: `restart dormant "${name}"` });
    await startIsxInstance(s.incus, name);
    await s.deps.checks?.repairCa(name, health, st[STAMP.caFingerprint]);
    await s.incus.updateInstance(name, (i) => ({
      ...i,
      config: { ...i.config, ...stampConfig({ [MCP_STAMP.dormant]: "" }) },
    }), { step: `unstamp ${name} dormant` });
  } catch (e) {
    throw new RefusalError(
      "unavailable",
      `instance "${name}" is now held by this session but, stopped as dormant, it could not be restarted (${
        (e as Error).message
      }); call adopt_instance again to retry`,
    );
  }
  s.audit({
    tool: "adopt_instance",
    instance: name,
    outcome: "started(dormant)",
    ms: s.deps.now() - t0,
  });
}

const adopt = tool({
  name: "adopt_instance",
  description:
    "Take over an instance of yours that another session left (an orphan), or with force one a stuck live session holds. Its tasks come along under the same ids.",
  input: z.strictObject({ instance: InstanceName, force: z.boolean().optional() }),
  output: z.strictObject({
    instance: z.string(),
    template: z.string(),
    purpose: z.string().optional(),
    supports_delegate: z.boolean(),
    tasks: z.array(TaskId),
    warning: z.string().optional(),
  }),
  hints: { readOnly: false, destructive: false, idempotent: true },
  async run(args, { session: s, signal }) {
    const inst = await s.incus.getInstance(args.instance).then((r) => r.value, (e) => {
      if (isNotFound(e)) {
        throw new RefusalError("not_found", `instance "${args.instance}" does not exist`);
      }
      throw e;
    });
    const st = readStamps(inst.config);
    const standing = s.standingOf(inst);
    if (standing.kind === "not_mcp" || standing.kind === "other_user") {
      throw new RefusalError(
        "refused",
        `instance "${args.instance}" was not made through isx mcp by this user; it cannot be adopted`,
      );
    }
    if (standing.kind === "kept") {
      throw new RefusalError(
        "refused",
        `instance "${args.instance}" was kept for the user; it cannot be adopted`,
      );
    }
    if (st[MCP_STAMP.pendingOp]) {
      throw new RefusalError(
        "busy",
        `instance "${args.instance}" is busy (${st[MCP_STAMP.pendingOp]}); retry shortly`,
      );
    }
    const template = st[STAMP.profile] ?? "";
    let delegates = false;
    try {
      delegates = approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template)
        .delegate_agents.length > 0;
    } catch { /* refused below, when adoption needs the template */ }
    const out = (ids: string[], warning?: string) => ({
      instance: args.instance,
      template,
      ...(st[MCP_STAMP.purpose] ? { purpose: st[MCP_STAMP.purpose] } : {}),
      supports_delegate: delegates,
      tasks: ids,
      ...(warning ? { warning } : {}),
    });
    if (standing.kind === "mine" && s.held.has(args.instance)) {
      // a wake-up that failed before is retried by adopting again
      if (inst.status === "Stopped" && st[MCP_STAMP.dormant]) {
        await wakeDormant(s, args.instance, st);
        const t = await adoptTasks(s, args.instance);
        return { structured: out(t.ids, t.warning), audit: "adopted" };
      }
      const held = s.held.get(args.instance)!;
      if (held.tasksUnread) {
        // an adoption answered busy (a sweep's mark outlived the wait) is finished now
        const t = await adoptTasks(s, args.instance);
        if (!t.warning) delete held.tasksUnread;
        return { structured: out(t.ids, t.warning), audit: "adopted" };
      }
      return {
        structured: out(
          [...s.tasks.values()].filter((t) => t.instance === args.instance).map((t) => t.id),
        ),
        audit: "adopted(already)",
      };
    }
    if (standing.kind === "held_elsewhere" && !args.force) {
      throw new RefusalError(
        "not_held",
        `instance "${args.instance}" is held by a live session (pid ${standing.pid}, client ${standing.client}, in ${standing.cwd}); pass force: true to take it from a stuck session`,
      );
    }
    approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template);
    // as it is now: a sweep that was under way may have stopped it as dormant
    const now = await takeOver(s, inst, signal);
    const nst = readStamps(now.config);
    if (now.status === "Stopped" && nst[MCP_STAMP.dormant]) {
      await wakeDormant(s, args.instance, nst);
    }
    const t = await adoptTasks(s, args.instance);
    return {
      structured: out(t.ids, t.warning),
      audit: standing.kind === "held_elsewhere" ? "adopted(force)" : "adopted",
    };
  },
});

const start = tool({
  name: "start_instance",
  description:
    "Start a stopped instance this session holds (with a fresh instance secret, as isx start does).",
  input: Named,
  output: z.strictObject({
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
  input: z.strictObject({ instance: InstanceName, force: z.boolean().optional() }),
  output: z.strictObject({
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
  input: Named,
  output: z.strictObject({ instance: z.string() }),
  hints: { readOnly: false, destructive: false, idempotent: true },
  async run(args, { session: s }) {
    await s.requireHeld(args.instance);
    const at = new Date(s.deps.now()).toISOString();
    await s.incus.updateInstance(args.instance, (i) => ({
      ...i,
      config: { ...i.config, ...stampConfig({ [MCP_STAMP.kept]: at }) },
    }), { step: `keep ${args.instance}` });
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
  input: Named,
  output: z.strictObject({ instance: z.string(), already: z.boolean() }),
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
