/**
 * The start of one delegation (§2.6): claim the held instance (one agent at a time per
 * instance, refused `wrong_state` otherwise) or create the fresh one, prepare the guest
 * directory, check a Claude model, and build the run (script, prompt, files) the task engine
 * launches. The instruction and brief travel as files, never on a command line.
 *
 * @module
 */

import { agentRunScript } from "../../guest/mod.ts";
import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { createInstance } from "../session/create.ts";
import { AGENT_USER, GUEST_DENO, prepareGuest, RUNNER_DIR, taskDir } from "../delegate/guest.ts";
import { checkClaudeModel } from "../delegate/preflight.ts";
import { DELEGATE_BRIEF, type DelegateAgent } from "../delegate/report.ts";
import { requireRunning, taskService } from "./exec.ts";

/** What {@link prepareDelegation} needs from the call. */
export interface DelegationPlan {
  /** The held instance to run in; without it, a fresh instance of `template`. */
  instance?: string | undefined;
  /** The instance's template (the held one's, or the one to create). */
  template: string;
  /** The agent chosen. */
  agent: DelegateAgent;
  /** The prompt (instruction or skill invocation). */
  prompt: string;
  /** A fresh instance's purpose. */
  purpose?: string | undefined;
  /** The working directory asked for (absolute, or under the agent's home). */
  cwd?: string | undefined;
  /** The model override. */
  model?: string | undefined;
  /** The idempotency key. */
  key?: string | undefined;
  /** The call's cancellation. */
  signal: AbortSignal;
}

/** What a start has made or claimed so far, for the caller to undo or release. */
export interface StartClaims {
  /** The fresh instance created (destroyed again when the start fails). */
  created?: string;
  /** The held instance claimed (released when the start ends either way). */
  claimed?: string;
}

/** Instances with a delegation being started now (one busy agent per instance). */
const starting = new WeakMap<Session, Set<string>>();

/** The instance's running agent task, if any (this session's tasks, probed in one exec). */
async function busyAgent(s: Session, instance: string): Promise<string | undefined> {
  const agents = [...s.tasks.values()].filter((t) => t.instance === instance && t.kind === "agent");
  if (!agents.length) return undefined;
  const p = await taskService(s).probe(instance, agents.map((t) => t.id));
  return agents.find((t) => p.get(t.id) !== "done")?.id;
}

/** Claims `instance` for a start, or refuses `wrong_state` if a start is under way there. */
function claim(s: Session, instance: string, claims: StartClaims): void {
  const inFlight = starting.get(s) ?? new Set<string>();
  starting.set(s, inFlight);
  if (inFlight.has(instance)) {
    throw new RefusalError(
      "wrong_state",
      `instance "${instance}" is starting another delegation; one agent at a time per instance (use template for parallel work)`,
    );
  }
  inFlight.add(instance);
  claims.claimed = instance;
}

/** Refuses `wrong_state` when an agent task this session knows runs in `instance`. */
async function refuseBusy(s: Session, instance: string): Promise<void> {
  const busy = await busyAgent(s, instance);
  if (busy) {
    throw new RefusalError(
      "wrong_state",
      `instance "${instance}" already has a running agent task ${busy}; wait for it, or use template for parallel work`,
    );
  }
}

/** Releases what {@link prepareDelegation} claimed (call once the start has ended). */
export function releaseClaims(s: Session, claims: StartClaims): void {
  if (claims.claimed) starting.get(s)?.delete(claims.claimed);
}

/** Readies the instance for task `taskId` and returns the run the task engine launches. */
export async function prepareDelegation(
  s: Session,
  taskId: string,
  o: DelegationPlan & { claims: StartClaims },
) {
  let instance = o.instance;
  if (instance) {
    claim(s, instance, o.claims);
  } else {
    // a keyed fresh instance carries the key (stamped by the copy request itself, §5)
    const c = await createInstance(s, {
      template: o.template,
      name_hint: "task",
      ...(o.purpose ? { purpose: o.purpose } : {}),
      ...(o.key ? { idempotency_key: o.key } : {}),
    }, { keyClaimed: true });
    instance = c.instance;
    if (c.replayed) {
      // another session's copy under the key came first (and is an orphan now): its task,
      // if it has one, answers a retry; else the task starts there, and stays if it fails
      claim(s, instance, o.claims);
      if (o.key && await taskService(s).findKeyed(s, instance, o.key)) {
        throw new RefusalError(
          "busy",
          `idempotency key "${o.key}": another call started this task first; retry as is to get it`,
        );
      }
    } else {
      o.claims.created = instance;
    }
  }
  // held here and running first (not_held says more than a stale busy), then not busy
  const { workdir } = await requireRunning(s, instance);
  if (o.claims.claimed) await refuseBusy(s, instance);
  const want = o.cwd === undefined
    ? workdir
    : o.cwd.startsWith("/")
    ? o.cwd
    : `${AGENT_USER.home}/${o.cwd}`;
  const cwd = await prepareGuest(s.incus, instance, want);
  if (o.model && o.agent === "claude") {
    await checkClaudeModel(s, {
      instance,
      template: o.template,
      model: o.model,
      signal: o.signal,
    });
  }
  const script = agentRunScript({
    deno: GUEST_DENO,
    scripts: RUNNER_DIR,
    dir: taskDir(taskId),
    run: 1,
    agent: o.agent,
    home: AGENT_USER.home,
    task: taskId,
    cwd,
  });
  return {
    instance,
    run: 1,
    script,
    prompt: o.prompt,
    agent: o.agent,
    files: {
      agent: `${o.agent}\n`,
      cwd: `${cwd}\n`,
      "brief.md": DELEGATE_BRIEF,
      ...(o.model ? { model: `${o.model}\n` } : {}),
    },
    ...(o.key ? { key: o.key } : {}),
  };
}
