/**
 * `adopt_instance` (§2.4, §4.4): taking an orphan, or with `force` an instance a live session
 * holds, including waking one the sweep stopped as dormant and registering the tasks it
 * records. Apart from the other lifecycle tools (lifecycle.ts) because adoption is the one
 * that crosses sessions: it reads another holder's stamps, takes over, and restarts; the
 * rest act only on what this session already holds. The steps every adoption shares are
 * session/adoption.ts's.
 *
 * @module
 */

import * as z from "zod";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { adoptTasks, wakeDormant } from "../session/adoption.ts";
import { takeOver } from "../session/take_over.ts";
import { MCP_STAMP } from "../session/holding.ts";
import { approvedTemplate } from "../session/templates.ts";
import { InstanceName, TaskId, tool } from "./def.ts";

/** `adopt_instance`. */
export const adopt = tool({
  name: "adopt_instance",
  description:
    "Take over an instance of yours that another session left (an orphan), or with force one a stuck live session holds. Its tasks come along under the same ids.",
  input: () => z.strictObject({ instance: InstanceName, force: z.boolean().optional() }),
  output: () =>
    z.strictObject({
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
