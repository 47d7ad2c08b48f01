/**
 * The task tools (§2.6-2.11, §2.13): `task_status`, `wait_any`, `task_result`, `cancel_task`
 * over both kinds of task, in the order tools/list shows them with the delegation tools of
 * delegate.ts. A task's state is the same word everywhere: running, finished, attached,
 * lost, unknown.
 *
 * @module
 */

import * as z from "zod";
import type { TaskEntry } from "../session/mod.ts";
import { once, TaskId, TaskKind, TaskState, tool } from "./def.ts";
import { AgentResult, agentResult, agentStatus, AgentStatusFields } from "./agent_result.ts";
import { delegateTools } from "./delegate.ts";
import { requireRunning, taskService } from "./exec.ts";
import { commandData } from "../delegate/ask_prompt.ts";
import { Answer, prepareAsk } from "./_ask.ts";
import { known } from "./_agent_common.ts";

/** The longest wait (§2). */
export const MAX_WAIT_SECONDS = 300;

const status = tool({
  name: "task_status",
  description:
    "A task's state read from its instance (running, finished, attached, lost, unknown), with output tails. wait_seconds (≤300) waits until it is no longer running. For an agent task, join_command is what a person runs to join its conversation; while they are in it the task reads attached (attached_pid).",
  input: () =>
    z.strictObject({ task_id: TaskId, wait_seconds: z.number().int().min(0).optional() }),
  output: () =>
    z.strictObject({
      task_id: TaskId,
      instance: z.string(),
      kind: TaskKind,
      state: TaskState,
      run: z.number().int(),
      exit_code: z.number().int().optional(),
      started_at: z.string().optional(),
      last_activity: z.string().optional(),
      stdout_bytes: z.number().int().optional(),
      stderr_bytes: z.number().int().optional(),
      stdout_tail: z.string().optional(),
      stderr_tail: z.string().optional(),
      // agent tasks: the person in the conversation, and how to join it (spec §2.7, §12.4)
      attached_pid: z.number().int().optional(),
      join_command: z.string().optional(),
      ...AgentStatusFields,
    }),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s, signal }) {
    const t = known(s, args.task_id);
    await requireRunning(s, t.instance);
    const svc = taskService(s);
    const until = s.deps.now() + Math.min(args.wait_seconds ?? 0, MAX_WAIT_SECONDS) * 1000;
    while (s.deps.now() < until && !signal.aborted) {
      const p = await svc.probe(t.instance, [t.id]);
      if (p.get(t.id) !== "running") break;
      await s.deps.sleep(Math.min(2000, Math.max(0, until - s.deps.now())), signal).catch(() => {});
    }
    const st = await svc.status(s, t);
    return { structured: t.kind === "agent" ? agentStatus(t, st) : st };
  },
});

const Brief = once(() =>
  z.strictObject({
    task_id: TaskId,
    instance: z.string(),
    kind: TaskKind,
    state: TaskState,
    exit_code: z.number().int().optional(),
  })
);

const waitAny = tool({
  name: "wait_any",
  description:
    "Wait until any of the given tasks (default: every running task of this session) is no longer running, or timeout_seconds (default and max 300) passes. Use one wait_any per tick instead of polling each task.",
  input: () =>
    z.strictObject({
      task_ids: z.array(TaskId).optional(),
      timeout_seconds: z.number().optional(),
    }),
  output: () => z.strictObject({ tasks: z.array(Brief()), finished: z.array(TaskId) }),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s, signal }) {
    const ids = args.task_ids ??
      [...s.tasks.values()].filter((t) => t.state === "running").map((t) => t.id);
    const watched = ids.map((id) => known(s, id));
    if (!watched.length) {
      return {
        structured: { tasks: [], finished: [] },
        text: "Nothing is running: no task to wait for.",
      };
    }
    const svc = taskService(s);
    const timeout = Math.min(
      MAX_WAIT_SECONDS,
      Math.max(0, args.timeout_seconds ?? MAX_WAIT_SECONDS),
    );
    const until = s.deps.now() + timeout * 1000;
    const byInstance = new Map<string, TaskEntry[]>();
    for (const t of watched) byInstance.set(t.instance, [...byInstance.get(t.instance) ?? [], t]);
    const finished = new Set<string>();
    for (;;) {
      await Promise.all([...byInstance].map(async ([inst, ts]) => {
        const p = await svc.probe(inst, ts.map((t) => t.id)).catch(() => new Map<string, string>());
        for (const t of ts) if (p.get(t.id) === "done") finished.add(t.id);
      }));
      if (finished.size || signal.aborted || s.deps.now() >= until) break;
      await s.deps.sleep(Math.min(2000, until - s.deps.now()), signal).catch(() => {});
    }
    const tasks = await Promise.all(watched.map(async (t) => {
      if (finished.has(t.id)) {
        const st = await svc.status(s, t).catch(() => undefined);
        if (st) {
          return Brief().parse({
            task_id: t.id,
            instance: t.instance,
            kind: t.kind,
            state: st.state,
            ...(st.exit_code !== undefined ? { exit_code: st.exit_code } : {}),
          });
        }
        return { task_id: t.id, instance: t.instance, kind: t.kind, state: "unknown" as const };
      }
      return { task_id: t.id, instance: t.instance, kind: t.kind, state: t.state };
    }));
    return { structured: { tasks, finished: [...finished] } };
  },
});

const result = tool({
  name: "task_result",
  description:
    "The outcome of a finished task: for an agent, its report (first max_bytes), outcome, turns, tokens and cost where the agent reports them (events: true adds its last activities); for a command, the tails of stdout and stderr (max_bytes each). ask: a question the template's summary agent answers about the report or output, returned as answer instead of it.",
  input: () =>
    z.strictObject({
      task_id: TaskId,
      max_bytes: z.number().int().optional(),
      events: z.boolean().optional(),
      ask: z.string().optional(),
    }),
  // one closed object for both kinds: command fields, or agent fields (AgentResult)
  output: () =>
    AgentResult().partial().extend({
      task_id: TaskId,
      instance: z.string(),
      kind: TaskKind,
      state: TaskState,
      truncated: z.boolean().optional(), // absent only with ask
      stdout: z.string().optional(),
      stderr: z.string().optional(),
      stdout_bytes: z.number().int().optional(),
      stderr_bytes: z.number().int().optional(),
      answer: Answer().optional(),
    }),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s, signal, progress }) {
    const t = known(s, args.task_id);
    await requireRunning(s, t.instance);
    if (args.ask !== undefined) {
      const ask = prepareAsk(s, { tool: "task_result", instance: t.instance, question: args.ask });
      // the agent's report, or both streams of the command, as the tails hold them
      const r = t.kind === "agent"
        ? await agentResult(s, t, {
          maxBytes: 256 * 1024,
          ...(args.events ? { events: true } : {}),
        })
        : await taskService(s).result(s, t, 256 * 1024);
      const { report, truncated: _t, stdout, stderr, ...rest } = r;
      const data = t.kind === "agent" ? String(report) : commandData({
        exit_code: r.exit_code as number | undefined,
        stdout: String(stdout),
        stderr: String(stderr),
        stdout_bytes: Number(r.stdout_bytes),
        stderr_bytes: Number(r.stderr_bytes),
      });
      const answer = await ask.answer(data, { signal, progress });
      return {
        structured: { ...rest, answer },
        text: `${answer.text}\n\n(${t.kind} task ${t.id}, exit ${
          r.exit_code ?? "-"
        }; asked ${ask.who.agent} about ${answer.summarised})`,
        audit: `ask=${ask.who.agent}`,
      };
    }
    if (t.kind === "agent") {
      const r = await agentResult(s, t, {
        ...(args.max_bytes !== undefined ? { maxBytes: args.max_bytes } : {}),
        ...(args.events ? { events: true } : {}),
      });
      return {
        structured: r,
        text: String(r.report) + `\n\n(${r.outcome}, exit ${r.exit_code ?? "-"})`,
      };
    }
    const bytes = Math.min(256 * 1024, Math.max(256, args.max_bytes ?? 16 * 1024));
    return { structured: await taskService(s).result(s, t, bytes) };
  },
});

const cancel = tool({
  name: "cancel_task",
  description:
    "Stop a task and everything it started (TERM, then KILL). Its state reads unknown until task_status reads it.",
  input: () => z.strictObject({ task_id: TaskId }),
  output: () => z.strictObject({ task_id: TaskId, instance: z.string(), kind: TaskKind }),
  hints: { readOnly: false, destructive: true, idempotent: true },
  async run(args, { session: s }) {
    const t = known(s, args.task_id);
    await requireRunning(s, t.instance);
    await taskService(s).cancel(s, t.instance, [t.id]);
    if (t.state === "running") s.report(t, "unknown");
    return {
      structured: { task_id: t.id, instance: t.instance, kind: t.kind },
      audit: `task=${t.id} cancelled`,
    };
  },
});

/** The task tools. */
export const taskTools = [
  delegateTools.delegate,
  status,
  waitAny,
  result,
  delegateTools.sendMessage,
  cancel,
  delegateTools.getDiff,
];
