/**
 * The agent half of `task_status` and `task_result` (§2.7, §2.9): an agent task's raw output
 * is its events stream, which these turn into activities, figures and the final report.
 *
 * @module
 */

import * as z from "zod";
import { RefusalError } from "../errors.ts";
import type { Session, TaskEntry } from "../session/mod.ts";
import { readAgentEvents, scanAgentEvents } from "../delegate/report.ts";
import { once, TaskId, TaskState } from "./def.ts";
import { taskService } from "./exec.ts";

/** `task_result` of an agent task (§2.9): the report and the figures the agent reported. */
export const AgentResult = once(() =>
  z.strictObject({
    task_id: TaskId,
    instance: z.string(),
    kind: z.literal("agent"),
    state: TaskState,
    exit_code: z.number().int().optional(),
    run: z.number().int(),
    agent: z.string().optional(),
    outcome: z.string(),
    is_error: z.boolean(),
    turns: z.number().int().optional(),
    cost_usd: z.number().optional(),
    tokens: z.strictObject({
      input_tokens: z.number(),
      output_tokens: z.number(),
      cache_read_input_tokens: z.number(),
      cache_creation_input_tokens: z.number(),
    }).optional(),
    permission_denials: z.array(z.string()),
    session_id: z.string().optional(),
    recent: z.array(z.string()),
    report: z.string(),
    report_bytes: z.number().int(),
    truncated: z.boolean(),
  })
);

/** Reads an agent task's result; `task_failed` (with the stderr tail) when it wrote none. */
export async function agentResult(
  s: Session,
  t: TaskEntry,
  o: { maxBytes?: number; events?: boolean },
): Promise<Record<string, unknown>> {
  const r = await taskService(s).result(s, t, 256 * 1024);
  const maxBytes = Math.min(256 * 1024, Math.max(256, o.maxBytes ?? 16 * 1024));
  const rep = readAgentEvents(String(r.stdout ?? ""), { maxBytes, recentN: 20 });
  const stderr = String(r.stderr ?? "").slice(-2000);
  if (!rep) {
    throw new RefusalError(
      "task_failed",
      `task ${t.id} (run ${t.run}) ended without a result${
        r.exit_code !== undefined ? ` (exit ${r.exit_code})` : ""
      }; the agent's stderr ends:\n${stderr || "(empty)"}`,
    );
  }
  const { assistant_messages: _n, recent, ...rest } = rep;
  return AgentResult().parse({
    task_id: t.id,
    instance: t.instance,
    kind: "agent",
    state: r.state,
    ...(r.exit_code !== undefined ? { exit_code: r.exit_code } : {}),
    run: t.run,
    ...(t.agent ? { agent: t.agent } : {}),
    ...rest,
    recent: o.events ? recent : [],
  });
}

/** task_status's agent fields (spec §2.7), read from the status's events tail. */
export const AgentStatusFields = {
  agent: z.string().optional(),
  assistant_messages: z.number().int().optional(),
  recent: z.array(z.string()).optional(),
  cost_usd: z.number().optional(),
  agent_stderr: z.string().optional(),
};

/**
 * Turns a status read of an agent task into its agent form: activities instead of the raw
 * events tail, the cost once the run has a result, the stderr tail only when it is lost or
 * finished without a result.
 */
export function agentStatus(t: TaskEntry, st: Record<string, unknown>): Record<string, unknown> {
  const { stdout_tail, stderr_tail, stdout_bytes: _o, stderr_bytes: _e, ...rest } = st;
  const scan = scanAgentEvents(String(stdout_tail ?? ""));
  const cost = scan.result?.total_cost_usd;
  const failed = st.state === "lost" || (st.state === "finished" && !scan.result);
  return {
    ...rest,
    ...(t.agent ? { agent: t.agent } : {}),
    assistant_messages: scan.assistants,
    recent: scan.recent.slice(-8),
    ...(typeof cost === "number" && Number.isFinite(cost) ? { cost_usd: cost } : {}),
    ...(failed && stderr_tail ? { agent_stderr: String(stderr_tail) } : {}),
  };
}
