/**
 * `send_message` (§2.10): continues a finished agent task in the same agent session and
 * directory as its next run. The guest's record of the run (agent, cwd, session id) is data:
 * only a known agent's runner is ever started from it.
 *
 * @module
 */

import * as z from "zod";
import { agentRunScript } from "../../guest/mod.ts";
import { RefusalError } from "../errors.ts";
import {
  AGENT_USER,
  agentFacts,
  GUEST_DENO,
  prepareGuest,
  RUNNER_DIR,
  taskDir,
} from "../delegate/guest.ts";
import { checkClaudeModel } from "../delegate/preflight.ts";
import { DELEGATE_AGENTS, type DelegateAgent } from "../delegate/report.ts";
import { known, Model, Started, started } from "./_agent_common.ts";
import { TaskId, tool } from "./def.ts";
import { requireRunning, taskService } from "./exec.ts";

/** The `send_message` tool. */
export const sendMessage = tool({
  name: "send_message",
  description:
    "Continue a finished agent task with a new message: the next run resumes the same agent session in the same directory (model: a new override for this and later runs). Answers at once; follow it with wait_any.",
  input: () =>
    z.strictObject({ task_id: TaskId, message: z.string().min(1), model: Model.optional() }),
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
