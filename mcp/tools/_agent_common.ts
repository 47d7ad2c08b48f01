/**
 * What the delegation tools share (delegate, send_message, get_diff): the model-name and
 * started-answer schemas, the session's task lookup and the mapping of a `TypeError` from the
 * pure delegation core into the refusal `invalid_argument`.
 *
 * @module
 */

import * as z from "zod";
import { RefusalError } from "../errors.ts";
import type { Session, TaskEntry } from "../session/mod.ts";
import { type DelegateAgent, PERMISSION_MODE } from "../delegate/report.ts";
import { once, TaskId } from "./def.ts";

/** A model name as the agents' CLIs take it. */
export const Model = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,119}$/);

/** The answer of `delegate` and `send_message`: the task that runs. */
export const Started = once(() =>
  z.strictObject({
    task_id: TaskId,
    instance: z.string(),
    kind: z.literal("agent"),
    run: z.number().int(),
    agent: z.string(),
    permission_mode: z.string(),
    model: z.string().optional(),
    replayed: z.boolean().optional(),
  })
);

/** This session's task `id`, or the refusal `not_found`. */
export function known(s: Session, id: string): TaskEntry {
  const t = s.tasks.get(id);
  if (!t) {
    throw new RefusalError(
      "not_found",
      `this session has no task "${id}" (list_instances shows its tasks)`,
    );
  }
  return t;
}

/** Rethrows a `TypeError` (a bad argument found by the pure core) as `invalid_argument`. */
export function invalid(e: unknown): never {
  if (e instanceof TypeError) throw new RefusalError("invalid_argument", e.message);
  throw e;
}

/** The {@link Started()} answer for task `t` run by `agent`. */
export function started(
  t: TaskEntry,
  agent: string,
  model?: string,
  replayed?: boolean,
): z.infer<ReturnType<typeof Started>> {
  return {
    task_id: t.id,
    instance: t.instance,
    kind: "agent" as const,
    run: t.run,
    agent,
    permission_mode: PERMISSION_MODE[agent as DelegateAgent] ?? "full-access",
    ...(model ? { model } : {}),
    ...(replayed ? { replayed: true } : {}),
  };
}
