/**
 * What every adoption does after the take-over (§2.4, §4.3, §5 step 3), shared by
 * `adopt_instance`, `start_instance` and a keyed `create_instance` or `delegate` that finds
 * an orphan under its key: `isx branch`'s preflight before a start, waking an orphan the
 * sweep stopped as dormant, and reading the instance's task records into the session.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { hasCode } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { startIsxInstance } from "../instances/lifecycle.ts";
import type { Definitions } from "../templates/load.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import { takeOver } from "./take_over.ts";

/** Runs `isx branch`'s preflight; its refusal (the user must act) is `refused`. */
export async function preflight(
  s: Session,
  o: { action: string; template?: string; defs?: Definitions },
): Promise<unknown> {
  if (!s.deps.checks) return undefined;
  try {
    return await s.deps.checks.preflight(o);
  } catch (e) {
    if (hasCode(e, "not_ready")) {
      throw new RefusalError(
        "refused",
        `${e.message.replace(/ \(or --no-preflight\)$/, "")}; ask the user to fix it`,
      );
    }
    throw e;
  }
}

/** Registers the tasks an instance records; a read failure is a warning, not a refusal. */
export async function adoptTasks(
  s: Session,
  name: string,
): Promise<{ ids: string[]; warning?: string }> {
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
 * again. `tool` names the caller in the audit log and the refusal's advice.
 */
export async function wakeDormant(
  s: Session,
  name: string,
  st: Record<string, string>,
  tool = "adopt_instance",
): Promise<void> {
  const t0 = s.deps.now();
  try {
    const health = await preflight(s, { action: `restart dormant "${name}"` });
    await startIsxInstance(s.incus, name);
    await s.deps.checks?.repairCa(name, health, st[STAMP.caFingerprint]);
    await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.dormant]: "" }), {
      step: `unstamp ${name} dormant`,
    });
  } catch (e) {
    throw new RefusalError(
      "unavailable",
      `instance "${name}" is now held by this session but, stopped as dormant, it could not be restarted (${
        (e as Error).message
      }); call ${tool} again to retry`,
    );
  }
  s.audit({ tool, instance: name, outcome: "started(dormant)", ms: s.deps.now() - t0 });
}

/**
 * A keyed repeat's adoption of what its key made (§5 step 3): an orphan is taken over; it,
 * or one this session already holds but could not wake before, is woken if the sweep
 * stopped it as dormant; then its task records are read. A running instance whose records
 * cannot be read is released again and the call is `unavailable` (its tasks would not
 * answer here); a stopped one's are read when it is started. Anything else held here is
 * left as it is.
 */
export async function adoptKeyed(
  s: Session,
  inst: Instance,
  orphan: boolean,
  tool: string,
): Promise<void> {
  const asleep = (i: Instance) =>
    i.status === "Stopped" && !!readStamps(i.config)[MCP_STAMP.dormant];
  if (!orphan && !asleep(inst)) return;
  const now = orphan ? await takeOver(s, inst) : inst;
  if (asleep(now)) await wakeDormant(s, inst.name, readStamps(now.config), tool);
  else if (now.status !== "Running") return;
  const t = await adoptTasks(s, inst.name);
  if (!t.warning) return;
  await s.releaseOne(inst.name);
  throw new RefusalError(
    "unavailable",
    `instance "${inst.name}" was made under this key, but ${t.warning}; it was released again: retry shortly, or ask the user to look at it (isx shell ${inst.name})`,
  );
}
