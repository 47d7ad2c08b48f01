/**
 * The orphan sweep (shared/spec/isx-mcp.md §4.4), run in the background by each session (at
 * its start, then every 10 minutes: sweeper.ts): an orphan of this user whose holder ended
 * without stamping it (killed) is stamped now, so its grace starts when it is first known; an orphan past `orphan-grace-hours` is
 * destroyed unless it is in use (running with a task still running or a person in a terminal,
 * or its tasks cannot be read). The destroy is guarded: `pending-op: deleting` first, then the holder is read
 * again, and the sweep backs off if anyone took the instance meanwhile. Kept instances and
 * instances with a pending operation are never touched. An orphan kept alive only by
 * unfinished agent runs goes through dormancy (dormant_sweep.ts): stopped once quiet, then
 * destroyed `dormant-grace-hours` after that stop.
 *
 * @module
 */

import { readStamps, withStamps } from "../host/stamps.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { userInstances } from "./create.ts";
import { dormancyStep, dormantSince } from "./dormant_sweep.ts";
import { MCP_STAMP, orphanSince } from "./holding.ts";
import type { Session } from "./session.ts";

/** What one sweep did, per instance. */
export type SweepOutcome =
  | "stamped"
  | "destroyed"
  | "in-use"
  | "waiting"
  | "skipped"
  | "dormant";

/** Runs a step that sets a `pending-op` mark and removes it again (see sweeper.ts). */
export type MarkGuard = <T>(step: () => Promise<T>) => Promise<T>;

/**
 * Sweeps this user's orphans once; never throws (each failure is audited). Each step that
 * marks an instance runs through `guard`, so an ending server can wait for those steps only.
 */
export async function sweepOrphans(
  s: Session,
  guard: MarkGuard = (step) => step(),
): Promise<Map<string, SweepOutcome>> {
  const out = new Map<string, SweepOutcome>();
  let graceMs: number;
  try {
    graceMs = s.deps.readConfig().orphanGraceHours * 3_600_000;
  } catch {
    return out; // unreadable settings: sweep nothing rather than guess a grace
  }
  let all;
  try {
    all = await userInstances(s);
  } catch {
    return out;
  }
  await Promise.all(all.map(async (inst) => {
    const st = readStamps(inst.config);
    const standing = s.standingOf(inst);
    if (standing.kind !== "orphan" || st[MCP_STAMP.pendingOp] || st[MCP_STAMP.kept]) return;
    const t0 = s.deps.now();
    try {
      const since = orphanSince(st);
      if (!since) {
        const mark = `${new Date(s.deps.now()).toISOString()} ${standing.session}`;
        await s.incus.updateInstance(inst.name, (i) => {
          const cur = readStamps(i.config);
          if (cur[MCP_STAMP.session] !== standing.session) return i;
          return withStamps({ [MCP_STAMP.orphaned]: mark })(i);
        }, { step: `stamp orphan ${inst.name}` });
        out.set(inst.name, "stamped");
        return;
      }
      if (s.deps.now() < Date.parse(since) + graceMs) {
        out.set(inst.name, "waiting");
        return;
      }
      if (inst.status === "Running") {
        const [tasks, seen] = s.deps.tasks
          ? await Promise.all([
            s.deps.tasks.listStates(inst.name),
            s.deps.tasks.presence(inst.name),
          ])
          : [[], { present: false }];
        const open = tasks.filter((t) => t.state !== "finished" && t.state !== "lost");
        if (seen.present) {
          out.set(inst.name, "in-use"); // a person is in it
          return;
        }
        if (open.length > 0) {
          // kept only by agent runs: dormancy may stop it; anything else keeps it in use
          const agentsOnly = open.every((t) => t.kind === "agent");
          out.set(
            inst.name,
            agentsOnly ? await guard(() => dormancyStep(s, inst, seen.writeAgeMs)) : "in-use",
          );
          return;
        }
      } else {
        const dormant = dormantSince(st);
        const dormantGraceMs = s.deps.readConfig().dormantGraceHours * 3_600_000;
        if (dormant !== undefined && s.deps.now() < dormant + dormantGraceMs) {
          out.set(inst.name, "waiting");
          return;
        }
      }
      // guarded delete: mark, re-read the holder, back off if it changed (an ending server
      // waits for it, so the mark is never left behind)
      const gone = await guard(() => guardedDelete(s, inst.name, st));
      if (!gone) {
        out.set(inst.name, "skipped");
        return;
      }
      out.set(inst.name, "destroyed");
      s.audit({
        tool: "reap-orphans",
        instance: inst.name,
        outcome: "destroyed",
        ms: s.deps.now() - t0,
        detail: `orphaned since ${since}`,
      });
    } catch (e) {
      out.set(inst.name, "in-use");
      s.audit({
        tool: "reap-orphans",
        instance: inst.name,
        outcome: `failed: ${(e as Error).message}`,
        ms: s.deps.now() - t0,
      });
    }
  }));
  return out;
}

/** Marks `name` for deletion, re-reads its holder, and destroys it or backs off (false). */
async function guardedDelete(
  s: Session,
  name: string,
  st: Record<string, string>,
): Promise<boolean> {
  await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.pendingOp]: "deleting" }), {
    step: `mark ${name} for deletion`,
  });
  const again = readStamps((await s.incus.getInstance(name)).value.config);
  if (again[MCP_STAMP.session] !== st[MCP_STAMP.session] || again[MCP_STAMP.kept]) {
    await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.pendingOp]: "" }), {
      step: `unmark ${name}`,
    });
    return false;
  }
  await destroyIsxInstance(s.incus, name);
  return true;
}
