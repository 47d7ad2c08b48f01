/**
 * `delegate` (§2.6, seed 000) hands a self-contained task to an agent (Claude Code, Codex,
 * Pi, opencode) in a held instance or a fresh one. Runs go through the task engine (kind
 * `agent`): the run script starts the guest runner (guest/agents) under its own Deno grants;
 * the start itself is delegate_start.ts. A repeat with the same idempotency key answers the
 * first task (`replayed: true`). No agent has a turn limit: `max_turns` is not an argument,
 * so passing it is refused `invalid_argument`.
 *
 * The other delegation tools are send_message.ts and get_diff.ts; the agent half of
 * task_status and task_result is agent_result.ts.
 *
 * @module
 */

import { z } from "zod";
import { RefusalError } from "../errors.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { approvedTemplate } from "../session/templates.ts";
import { agentFacts } from "../delegate/guest.ts";
import { chooseAgent, type DelegateAgent, delegatePrompt } from "../delegate/report.ts";
import { invalid, Model, Started, started } from "./_agent_common.ts";
import { IdempotencyKey, InstanceName, tool } from "./def.ts";
import { requireRunning, taskService } from "./exec.ts";
import { prepareDelegation, releaseClaims, type StartClaims } from "./delegate_start.ts";
import { getDiff } from "./get_diff.ts";
import { sendMessage } from "./send_message.ts";

const Agent = z.enum(["claude", "codex", "pi", "opencode"]);

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
    const claims: StartClaims = {};
    if (key) s.keysInFlight.add(key);
    try {
      const t = await svc.launchAgent(s, {
        prepare: (taskId) =>
          prepareDelegation(s, taskId, {
            instance: args.instance,
            template: template!,
            agent,
            prompt,
            purpose: args.purpose,
            cwd: args.cwd,
            model: args.model,
            key,
            signal,
            claims,
          }),
      });
      return {
        structured: started(t, agent, args.model),
        audit: `task=${t.id} agent=${agent}`,
      };
    } catch (e) {
      if (claims.created) {
        // the fresh instance goes with the failed start (§2.6)
        s.held.delete(claims.created);
        await destroyIsxInstance(s.incus, claims.created).catch(() => {});
      }
      throw e;
    } finally {
      releaseClaims(s, claims);
      if (key) s.keysInFlight.delete(key);
    }
  },
});

/** The delegation tools (task_result's agent half is in agent_result.ts). */
export const delegateTools = { delegate, sendMessage, getDiff };
