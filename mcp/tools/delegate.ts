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

import * as z from "zod";
import { RefusalError } from "../errors.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { approvedTemplate } from "../session/templates.ts";
import type { Session } from "../session/mod.ts";
import { chooseAgent, type DelegateAgent, delegatePrompt } from "../delegate/report.ts";
import { invalid, Model, Started, started } from "./_agent_common.ts";
import { IdempotencyKey, InstanceName, once, tool, type ToolOutput } from "./def.ts";
import { findFirstAttempt, keyedTask, replayTask } from "./delegate_key.ts";
import { requireRunning, taskService } from "./exec.ts";
import { prepareDelegation, releaseClaims, type StartClaims } from "./delegate_start.ts";
import { getDiff } from "./get_diff.ts";
import { sendMessage } from "./send_message.ts";

const Agent = z.enum(["claude", "codex", "pi", "opencode"]);

const Input = once(() =>
  z.strictObject({
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
  })
);
type DelegateArgs = z.infer<ReturnType<typeof Input>>;

const delegate = tool({
  name: "delegate",
  description:
    "Hand a self-contained task to a coding agent (Claude Code, Codex, Pi or opencode) with full access inside an instance: give instruction (or skill + args) and either instance (one you hold, one agent at a time) or template (a fresh instance). Answers at once with a task_id; follow it with wait_any, read it with task_result, review it with get_diff, continue it with send_message.",
  input: () => Input(),
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
    taskService(s); // refused unavailable before anything is looked up
    const ask = { key: key ?? "", instance: args.instance, template: args.template };
    if (key) {
      const prior = keyedTask(s, key);
      if (prior) return await replayTask(s, ask, prior);
      if (s.keysInFlight.has(key)) {
        throw new RefusalError("busy", `idempotency key "${key}": the first call is still running`);
      }
    }
    // from here the key is this call's until it answers (a second call with it is `busy`)
    if (key) s.keysInFlight.add(key);
    try {
      let startOn: string | undefined;
      if (key) {
        const first = await findFirstAttempt(s, ask);
        if (first && "structured" in first) return first;
        startOn = first?.startOn;
      }
      return await start(s, args, { prompt, signal, startOn });
    } finally {
      if (key) s.keysInFlight.delete(key);
    }
  },
});

/** Starts the delegation (the key, if any, is held in flight by the caller). */
async function start(
  s: Session,
  args: DelegateArgs,
  o: { prompt: string; signal: AbortSignal; startOn: string | undefined },
): Promise<ToolOutput> {
  const key = args.idempotency_key;
  const cfg = s.deps.readConfig();
  // the instance named, or the one made under the key without its task
  const instance = args.instance ?? o.startOn;
  let template = args.template;
  if (instance) {
    const held = s.held.get(instance);
    if (!held) {
      await requireRunning(s, instance); // says why
      throw new RefusalError("not_found", `this session holds no instance "${instance}"`);
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
  try {
    const t = await taskService(s).launchAgent(s, {
      prepare: (taskId) =>
        prepareDelegation(s, taskId, {
          instance,
          template: template!,
          agent,
          prompt: o.prompt,
          purpose: args.purpose,
          cwd: args.cwd,
          model: args.model,
          key,
          signal: o.signal,
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
  }
}

/** The delegation tools (task_result's agent half is in agent_result.ts). */
export const delegateTools = { delegate, sendMessage, getDiff };
