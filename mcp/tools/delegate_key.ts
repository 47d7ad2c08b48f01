/**
 * A keyed `delegate` finds its first attempt (§5, seed 000): in this session's tasks, in the
 * named instance's task records, or (with `template`) through the instance made under the
 * key, in any session: an orphan left by a crashed or ended session is taken over and its
 * task records read, so a repeat in a new server process answers the same task with
 * `replayed: true` instead of branching a second instance. The key is both the instance's
 * `mcp-idempotency-key` stamp and the task's `key` file; nothing is kept on the host.
 * A repeat that asks for something else (another template, instance or kind of task) is
 * refused `invalid_argument`, never redirected.
 *
 * @module
 */

import { RefusalError } from "../errors.ts";
import type { Session, TaskEntry } from "../session/mod.ts";
import { replayKeyed } from "../session/create.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { MCP_STAMP } from "../session/holding.ts";
import { agentFacts } from "../delegate/guest.ts";
import { started } from "./_agent_common.ts";
import type { ToolOutput } from "./def.ts";
import { taskService } from "./exec.ts";

/** What the keyed call asked for. */
export interface KeyedAsk {
  /** The idempotency key. */
  key: string;
  /** The held instance named. */
  instance?: string | undefined;
  /** The template of a fresh instance. */
  template?: string | undefined;
}

/** This session's task started under `key`, if any (no I/O: call before anything awaits). */
export function keyedTask(s: Session, key: string): TaskEntry | undefined {
  return [...s.tasks.values()].find((t) => t.key === key);
}

function mismatch(a: KeyedAsk, t: TaskEntry, made: string): never {
  const asked = a.instance ? `instance "${a.instance}"` : `a fresh instance of "${a.template}"`;
  throw new RefusalError(
    "invalid_argument",
    `idempotency key "${a.key}" already started task ${t.id} (${t.kind}) on ${made}, not on ${asked}; use a new key for a different request`,
  );
}

/** The replayed answer for task `t`, after checking the repeat asks for what `t` was. */
export async function replayTask(
  s: Session,
  a: KeyedAsk,
  t: TaskEntry,
  o: { fresh?: boolean } = {},
): Promise<ToolOutput> {
  let fresh = o.fresh;
  if (a.template !== undefined && fresh === undefined) {
    // a task on a fresh instance: the instance carries the key and the template
    const inst = (await s.incus.getInstance(t.instance)).value;
    const st = readStamps(inst.config);
    fresh = st[MCP_STAMP.key] === a.key && st[STAMP.profile] === a.template;
  }
  const made = fresh ? `a fresh instance "${t.instance}"` : `instance "${t.instance}"`;
  if (t.kind !== "agent") mismatch(a, t, made);
  if (a.instance !== undefined && t.instance !== a.instance) mismatch(a, t, made);
  if (a.template !== undefined && !fresh) mismatch(a, t, made);
  const f = t.agent ? undefined : await agentFacts(s.incus, t.instance, t.id);
  return {
    structured: started(t, t.agent ?? f?.agent ?? "claude", f?.model, true),
    audit: `replayed key=${a.key}`,
    note: "Nothing new was started: this key already started this task (replayed).",
  };
}

/**
 * Looks for the first attempt of a keyed delegate beyond this session's registry (the
 * caller holds the key as in flight): its task → the replayed answer; with `template`, the
 * instance made under the key but without its task (cut off between the two) → `startOn`,
 * where the task is to be started; nothing → undefined.
 */
export async function findFirstAttempt(
  s: Session,
  a: KeyedAsk,
): Promise<ToolOutput | { startOn: string } | undefined> {
  const svc = taskService(s);
  if (a.instance !== undefined) {
    // a guest-written key counts only for an instance this session holds (§5)
    if (!s.held.has(a.instance)) return undefined;
    const found = await svc.findKeyed(s, a.instance, a.key);
    return found ? await replayTask(s, a, s.tasks.get(found.task_id)!) : undefined;
  }
  // an orphan under the key is taken over with its task records read (§5 step 3)
  const c = await replayKeyed(s, { template: a.template!, idempotency_key: a.key }, "delegate");
  if (!c) return undefined;
  const t = keyedTask(s, a.key) ??
    (await svc.findKeyed(s, c.instance, a.key).then((f) => f && s.tasks.get(f.task_id)));
  return t ? await replayTask(s, a, t, { fresh: t.instance === c.instance }) : {
    startOn: c.instance,
  };
}
