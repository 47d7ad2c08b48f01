/**
 * The delegation tools (§2.6, §2.9-2.11, seed 000): `delegate` hands a self-contained task to
 * an agent (Claude Code, Codex, Pi, opencode) in a held instance or a fresh one, `send_message`
 * continues it in the same session and directory, `get_diff` shows what it changed, and
 * {@link agentResult} is `task_result` for agent tasks. Runs go through the task engine
 * (kind `agent`): the run script starts the guest runner (guest/agents) under its own Deno
 * grants; instruction and brief travel as files, never on a command line. No agent has a
 * turn limit: `max_turns` is not an argument, so passing it is refused `invalid_argument`.
 *
 * @module
 */

import { z } from "zod";
import { agentRunScript } from "../../guest/mod.ts";
import { RefusalError } from "../errors.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import type { Session, TaskEntry } from "../session/mod.ts";
import { createInstance } from "../session/create.ts";
import { approvedTemplate } from "../session/templates.ts";
import {
  AGENT_USER,
  agentFacts,
  GUEST_DENO,
  guestDiff,
  prepareGuest,
  RUNNER_DIR,
  taskDir,
} from "../delegate/guest.ts";
import { checkClaudeModel } from "../delegate/preflight.ts";
import {
  chooseAgent,
  DELEGATE_AGENTS,
  DELEGATE_BRIEF,
  type DelegateAgent,
  delegatePrompt,
  PERMISSION_MODE,
  readAgentEvents,
  scanAgentEvents,
} from "../delegate/report.ts";
import { IdempotencyKey, InstanceName, TaskId, TaskState, tool } from "./def.ts";
import { requireRunning, taskService } from "./exec.ts";

const Model = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,119}$/);
const Agent = z.enum(["claude", "codex", "pi", "opencode"]);

const Started = z.strictObject({
  task_id: TaskId,
  instance: z.string(),
  kind: z.literal("agent"),
  run: z.number().int(),
  agent: z.string(),
  permission_mode: z.string(),
  model: z.string().optional(),
  replayed: z.boolean().optional(),
});

function known(s: Session, id: string): TaskEntry {
  const t = s.tasks.get(id);
  if (!t) {
    throw new RefusalError(
      "not_found",
      `this session has no task "${id}" (list_instances shows its tasks)`,
    );
  }
  return t;
}

function invalid(e: unknown): never {
  if (e instanceof TypeError) throw new RefusalError("invalid_argument", e.message);
  throw e;
}

function started(t: TaskEntry, agent: string, model?: string, replayed?: boolean) {
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

/** The instance's running agent task, if any (this session's tasks, probed in one exec). */
async function busyAgent(s: Session, instance: string): Promise<string | undefined> {
  const agents = [...s.tasks.values()].filter((t) => t.instance === instance && t.kind === "agent");
  if (!agents.length) return undefined;
  const p = await taskService(s).probe(instance, agents.map((t) => t.id));
  return agents.find((t) => p.get(t.id) !== "done")?.id;
}

/** Instances with a delegation being started now (one busy agent per instance). */
const starting = new WeakMap<Session, Set<string>>();

const delegate = tool({
  name: "delegate",
  description:
    "Hand a self-contained task to a coding agent (Claude Code, Codex, Pi or opencode) with full access inside an instance: give instruction (or skill + args) and either instance (one you hold, one agent at a time) or template (a fresh instance). Answers at once with a task_id; follow it with wait_any, read it with task_result, review it with get_diff, continue it with send_message.",
  input: z.strictObject({
    instruction: z.string().optional(),
    skill: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_:.-]{0,63}$/).optional(),
    args: z.string().optional(),
    instance: InstanceName.optional(),
    template: z.string().optional(),
    agent: Agent.optional(),
    purpose: z.string().optional(),
    cwd: z.string().optional(),
    model: Model.optional(),
    idempotency_key: IdempotencyKey.optional(),
  }),
  output: Started,
  hints: { readOnly: false, destructive: false, idempotent: false },
  taskSupport: "optional",
  async run(args, { session: s, signal }) {
    let prompt: string;
    try {
      prompt = delegatePrompt(args);
    } catch (e) {
      invalid(e);
    }
    if ((args.instance === undefined) === (args.template === undefined)) {
      throw new RefusalError(
        "invalid_argument",
        "delegate: give exactly one of instance and template",
      );
    }
    if (args.purpose !== undefined && args.template === undefined) {
      throw new RefusalError("invalid_argument", "delegate: purpose goes only with template");
    }
    const key = args.idempotency_key;
    const svc = taskService(s);
    if (key) {
      const prior = [...s.tasks.values()].find((t) => t.key === key);
      const found = prior
        ? { task_id: prior.id }
        : args.instance
        ? await svc.findKeyed(s, args.instance, key)
        : undefined;
      if (found) {
        const t = s.tasks.get(found.task_id)!;
        if (t.kind !== "agent" || (args.instance && t.instance !== args.instance)) {
          throw new RefusalError(
            "invalid_argument",
            `idempotency key "${key}" already started task ${t.id} (${t.kind}) on "${t.instance}"; use a new key`,
          );
        }
        const f = t.agent ? undefined : await agentFacts(s.incus, t.instance, t.id);
        return {
          structured: started(t, t.agent ?? f?.agent ?? "claude", f?.model, true),
          audit: `replayed key=${key}`,
          note: "Nothing new was started: this key already started this task (replayed).",
        };
      }
      if (s.keysInFlight.has(key)) {
        throw new RefusalError("busy", `idempotency key "${key}": the first call is still running`);
      }
    }
    const cfg = s.deps.readConfig();
    let template = args.template;
    if (args.instance) {
      const held = s.held.get(args.instance);
      if (!held) {
        await requireRunning(s, args.instance); // says why
        throw new RefusalError("not_found", `this session holds no instance "${args.instance}"`);
      }
      template = held.template;
    }
    const facts = approvedTemplate(cfg, s.deps.definitions(), template!);
    let agent: DelegateAgent;
    try {
      agent = chooseAgent(facts.delegate_agents.map((d) => String(d.agent)), args.agent);
    } catch (e) {
      invalid(e);
    }
    const inFlight = starting.get(s) ?? new Set<string>();
    starting.set(s, inFlight);
    let created: string | undefined;
    let claimed: string | undefined;
    if (key) s.keysInFlight.add(key);
    try {
      const t = await svc.launchAgent(s, {
        prepare: async (taskId) => {
          let instance = args.instance;
          if (instance) {
            if (inFlight.has(instance)) {
              throw new RefusalError(
                "wrong_state",
                `instance "${instance}" is starting another delegation; one agent at a time per instance (use template for parallel work)`,
              );
            }
            inFlight.add(instance);
            claimed = instance;
            const busy = await busyAgent(s, instance);
            if (busy) {
              throw new RefusalError(
                "wrong_state",
                `instance "${instance}" already has a running agent task ${busy}; wait for it, or use template for parallel work`,
              );
            }
          } else {
            const c = await createInstance(s, {
              template: template!,
              name_hint: "task",
              ...(args.purpose ? { purpose: args.purpose } : {}),
            });
            instance = created = c.instance;
          }
          const { workdir } = await requireRunning(s, instance);
          const want = args.cwd === undefined
            ? workdir
            : args.cwd.startsWith("/")
            ? args.cwd
            : `${AGENT_USER.home}/${args.cwd}`;
          const cwd = await prepareGuest(s.incus, instance, want);
          if (args.model && agent === "claude") {
            await checkClaudeModel(s, { instance, template: template!, model: args.model, signal });
          }
          const script = agentRunScript({
            deno: GUEST_DENO,
            scripts: RUNNER_DIR,
            dir: taskDir(taskId),
            run: 1,
            agent,
            home: AGENT_USER.home,
            task: taskId,
            cwd,
          });
          return {
            instance,
            run: 1,
            script,
            prompt,
            agent,
            files: {
              agent: `${agent}\n`,
              cwd: `${cwd}\n`,
              "brief.md": DELEGATE_BRIEF,
              ...(args.model ? { model: `${args.model}\n` } : {}),
            },
            ...(key ? { key } : {}),
          };
        },
      });
      return {
        structured: started(t, agent, args.model),
        audit: `task=${t.id} agent=${agent}`,
      };
    } catch (e) {
      if (created) {
        // the fresh instance goes with the failed start (§2.6)
        s.held.delete(created);
        await destroyIsxInstance(s.incus, created).catch(() => {});
      }
      throw e;
    } finally {
      if (claimed) inFlight.delete(claimed);
      if (key) s.keysInFlight.delete(key);
    }
  },
});

const sendMessage = tool({
  name: "send_message",
  description:
    "Continue a finished agent task with a new message: the next run resumes the same agent session in the same directory (model: a new override for this and later runs). Answers at once; follow it with wait_any.",
  input: z.strictObject({ task_id: TaskId, message: z.string().min(1), model: Model.optional() }),
  output: Started,
  hints: { readOnly: false, destructive: false, idempotent: false },
  taskSupport: "optional",
  async run(args, { session: s, signal }) {
    const t = known(s, args.task_id);
    if (t.kind !== "agent") {
      throw new RefusalError(
        "invalid_argument",
        `task ${t.id} is a command task; send_message continues agent tasks (delegate)`,
      );
    }
    await requireRunning(s, t.instance);
    const svc = taskService(s);
    const p = await svc.probeAttached(s, t); // the probe plus who is in the conversation
    if (p.state === "running") {
      throw new RefusalError(
        "wrong_state",
        `task ${t.id} is still running; wait_any or task_status with wait_seconds first`,
      );
    }
    if (p.state === "attached") {
      throw new RefusalError(
        "wrong_state",
        `task ${t.id} is attached: a person is in its conversation (pid ${
          p.attached_pid ?? "unknown"
        }, joined with isx shell --task ${t.id}); wait until they leave (task_status reads finished again)`,
      );
    }
    const f = await agentFacts(s.incus, t.instance, t.id);
    const agent = t.agent ?? f.agent;
    // the guest's record is data: only a known agent's runner is ever started
    if (!agent || !DELEGATE_AGENTS.includes(agent as DelegateAgent) || !f.cwd || !f.run) {
      throw new RefusalError(
        "wrong_state",
        `task ${t.id} has no record of its agent run to continue`,
      );
    }
    if (!f.session_id) {
      throw new RefusalError(
        "wrong_state",
        agent === "pi"
          ? `task ${t.id} has no saved Pi session yet (Pi saves it with its first answer); delegate again instead`
          : `task ${t.id} recorded no session to resume; delegate again instead`,
      );
    }
    const model = args.model ?? f.model;
    const run = Math.max(f.run, t.run) + 1;
    await svc.launchAgent(s, {
      existing: t,
      prepare: async () => {
        await prepareGuest(s.incus, t.instance, f.cwd!);
        if (args.model && agent === "claude") {
          const template = s.held.get(t.instance)?.template ?? "";
          await checkClaudeModel(s, { instance: t.instance, template, model: args.model, signal });
        }
        return {
          instance: t.instance,
          run,
          prompt: args.message.endsWith("\n") ? args.message : `${args.message}\n`,
          agent,
          script: agentRunScript({
            deno: GUEST_DENO,
            scripts: RUNNER_DIR,
            dir: taskDir(t.id),
            run,
            agent: agent as DelegateAgent,
            home: AGENT_USER.home,
            task: t.id,
          }),
          files: args.model ? { model: `${args.model}\n` } : {},
        };
      },
    });
    return { structured: started(t, agent, model), audit: `task=${t.id} run=${run}` };
  },
});

const getDiff = tool({
  name: "get_diff",
  description:
    "What an agent task changed: for every git repository recorded at its first run, committed + uncommitted + untracked changes against the commit it started from (numstat per file, and the patch unless stat or too large).",
  input: z.strictObject({
    task_id: TaskId,
    path: z.string().min(1).max(1024).optional(),
    stat: z.boolean().optional(),
    max_bytes: z.number().int().optional(),
  }),
  output: z.strictObject({
    repos: z.array(z.strictObject({
      repo: z.string(),
      files: z.array(z.strictObject({
        path: z.string(),
        added: z.number().int().nullable(),
        deleted: z.number().int().nullable(),
      })),
    })),
    patch: z.string().optional(),
    patch_bytes: z.number().int().optional(),
    too_large: z.boolean().optional(),
  }),
  hints: { readOnly: true, idempotent: true },
  async run(args, { session: s }) {
    const t = known(s, args.task_id);
    if (t.kind !== "agent") {
      throw new RefusalError(
        "invalid_argument",
        `task ${t.id} is a command task; get_diff reads agent tasks`,
      );
    }
    await requireRunning(s, t.instance);
    const maxBytes = Math.min(1024 * 1024, Math.max(1024, args.max_bytes ?? 256 * 1024));
    const d = await guestDiff(s.incus, t.instance, t.id, {
      sub: "diff",
      ...(args.path !== undefined ? { path: args.path } : {}),
      ...(args.stat ? { stat: true } : {}),
      maxBytes,
    });
    const repos = d.repos.map((r) => ({
      repo: r.repo,
      files: r.files.map((f) => ({ path: f.path, added: f.added, deleted: f.deleted })),
    }));
    const structured = {
      repos,
      ...(args.stat ? {} : {
        ...(d.patch !== undefined && !d.too_large ? { patch: d.patch } : {}),
        patch_bytes: d.patch_bytes,
        too_large: d.too_large,
      }),
    };
    const lines: string[] = [];
    let files = 0, add = 0, del = 0;
    for (const r of repos) {
      lines.push(`${r.repo}:`);
      for (const f of r.files) {
        files++;
        add += f.added ?? 0;
        del += f.deleted ?? 0;
        lines.push(`${f.added ?? "-"}\t${f.deleted ?? "-"}\t${f.path}`);
      }
    }
    const text = repos.length
      ? `${lines.join("\n")}\n ${files} files changed, ${add} insertions(+), ${del} deletions(-)` +
        (structured.patch !== undefined ? `\n---\n${structured.patch}` : "") +
        (d.too_large ? `\n---\n(the patch is ${d.patch_bytes} bytes, over max_bytes)` : "")
      : "No repository was recorded at the task's first run: nothing to compare.";
    return { structured, text };
  },
});

/** `task_result` of an agent task (§2.9): the report and the figures the agent reported. */
export const AgentResult = z.strictObject({
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
});

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
  return AgentResult.parse({
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

/** The delegation tools (task_result's agent half is {@link agentResult}). */
export const delegateTools = { delegate, sendMessage, getDiff };
