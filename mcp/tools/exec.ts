/**
 * `exec` (§2.5): a command in a held, running instance, as agentuser through `bash -c`.
 * Foreground calls stream their last output line as progress and end with output tails;
 * cancelling the call kills the command's whole process session in the guest. With
 * `background: true` it starts a command task and answers at once; an idempotency key makes
 * a repeat return the same task (`replayed: true`). `command`, `env`, `cwd` and `stdin`
 * travel to the guest as data (argv, environment, stdin), never spliced into a shell line.
 * With `ask` (foreground only), the template's summary agent answers the question about the
 * output instead of returning the tails (`answer`; see _ask.ts).
 *
 * @module
 */

import * as z from "zod";
import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { IdempotencyKey, InstanceName, TaskId, tool } from "./def.ts";
import { commandData } from "../delegate/ask_prompt.ts";
import { Answer, prepareAsk } from "./_ask.ts";

/** Output tail bounds (§2). */
export const OUTPUT = { default: 32 * 1024, min: 256, max: 256 * 1024 } as const;

/** The task machinery, or `unavailable`. */
export function taskService(s: Session) {
  const t = s.deps.tasks;
  if (!t) throw new RefusalError("unavailable", "the task engine is not available in this build");
  return t;
}

/** A held instance that must be running; its working directory default. */
export async function requireRunning(s: Session, name: string): Promise<{ workdir: string }> {
  const inst = await s.requireHeld(name);
  if (inst.status === "Stopped") {
    throw new RefusalError(
      "wrong_state",
      `instance "${name}" is stopped; start it with start_instance`,
    );
  }
  if (inst.status !== "Running") {
    throw new RefusalError(
      "wrong_state",
      `instance "${name}" is ${inst.status}; ask the user to look at it (isx shell ${name})`,
    );
  }
  return { workdir: readStamps(inst.config)[STAMP.workdir] || "/home/agentuser" };
}

const EnvName = /^[A-Za-z_][A-Za-z0-9_]*$/;

const exec = tool({
  name: "exec",
  description:
    "Run a shell command (bash -c, as agentuser, sudo works) in an instance you hold. Foreground by default, with output tails; background: true starts a task and answers at once (follow it with wait_any, task_status, task_result). ask (foreground): a question the template's summary agent answers about the output, returned as answer instead of the tails.",
  input: () =>
    z.strictObject({
      instance: InstanceName,
      command: z.string().min(1),
      cwd: z.string().optional(),
      env: z.record(z.string(), z.string()).optional(),
      stdin: z.string().max(1024 * 1024).optional(),
      timeout_seconds: z.number().int().positive().optional(),
      max_output_bytes: z.number().int().optional(),
      ask: z.string().optional(),
      background: z.boolean().optional(),
      idempotency_key: IdempotencyKey.optional(),
    }),
  output: () =>
    z.strictObject({
      background: z.boolean(),
      exit_code: z.number().int().optional(),
      duration_ms: z.number().int().optional(),
      timed_out: z.boolean().optional(),
      cancelled: z.boolean().optional(),
      stdout: z.string().optional(),
      stderr: z.string().optional(),
      stdout_bytes: z.number().int().optional(),
      stderr_bytes: z.number().int().optional(),
      truncated: z.boolean().optional(),
      task_id: TaskId.optional(),
      instance: z.string().optional(),
      kind: z.literal("command").optional(),
      replayed: z.boolean().optional(),
      answer: Answer().optional(),
    }),
  hints: { readOnly: false, destructive: false, idempotent: false },
  taskSupport: "optional",
  async run(args, { session: s, signal, progress }) {
    for (const k of Object.keys(args.env ?? {})) {
      if (!EnvName.test(k)) {
        throw new RefusalError(
          "invalid_argument",
          `env: "${k}" is not a variable name (A-Za-z_ then A-Za-z0-9_)`,
        );
      }
    }
    if (args.ask !== undefined && args.background) {
      throw new RefusalError(
        "invalid_argument",
        "exec: ask does not apply with background: true; ask with task_result once the task ends",
      );
    }
    if (args.idempotency_key !== undefined && !args.background) {
      throw new RefusalError(
        "invalid_argument",
        "exec: idempotency_key applies only with background: true",
      );
    }
    if (args.background && (args.stdin !== undefined || args.timeout_seconds !== undefined)) {
      throw new RefusalError(
        "invalid_argument",
        "exec: stdin and timeout_seconds do not apply with background: true",
      );
    }
    const checked: { ask?: ReturnType<typeof prepareAsk> } = {};
    const ready = requireRunning(s, args.instance).then(({ workdir }) => {
      // checked before the command runs: a refused ask runs nothing
      if (args.ask !== undefined) {
        checked.ask = prepareAsk(s, { tool: "exec", instance: args.instance, question: args.ask });
      }
      return args.cwd === undefined
        ? workdir
        : args.cwd.startsWith("/")
        ? args.cwd
        : `/home/agentuser/${args.cwd}`;
    });
    ready.catch(() => {}); // awaited below, on every path
    // A foreground command in an instance this session holds starts its exec while the
    // check runs (its login shell runs nothing until the check passed and sent the cwd);
    // any other call is checked first, so nothing starts where the session holds nothing.
    const mine = s.held.get(args.instance)?.state === "ready";
    if (args.background || !mine || !s.deps.tasks) await ready;
    const svc = taskService(s);
    if (args.background) {
      const key = args.idempotency_key;
      if (key) {
        const known = [...s.tasks.values()].find((t) => t.key === key);
        if (known && (known.instance !== args.instance || known.command !== args.command)) {
          throw new RefusalError(
            "invalid_argument",
            `idempotency key "${key}" already started task ${known.id} on "${known.instance}" for another command; use a new key`,
          );
        }
        const found = known ? { task_id: known.id } : await svc.findKeyed(s, args.instance, key);
        if (found) {
          return {
            structured: {
              background: true,
              task_id: found.task_id,
              instance: args.instance,
              kind: "command" as const,
              replayed: true,
            },
            audit: `replayed key=${key}`,
            note: "Nothing new was started: this key already started this task (replayed).",
          };
        }
        if (s.keysInFlight.has(key)) {
          throw new RefusalError(
            "busy",
            `idempotency key "${key}": the first call is still running; retry as is`,
          );
        }
      }
      if (key) s.keysInFlight.add(key);
      try {
        const t = await svc.startCommand(s, args.instance, {
          command: args.command,
          cwd: await ready,
          ...(args.env ? { env: args.env } : {}),
          ...(key ? { key } : {}),
        });
        return {
          structured: {
            background: true,
            task_id: t.id,
            instance: args.instance,
            kind: "command" as const,
          },
          audit: `task=${t.id}`,
        };
      } finally {
        if (key) s.keysInFlight.delete(key);
      }
    }
    // with ask, the agent reads as much as the tails hold (it keeps the last 400 KiB)
    const bytes = args.ask !== undefined ? OUTPUT.max : Math.min(
      OUTPUT.max,
      Math.max(OUTPUT.min, args.max_output_bytes ?? OUTPUT.default),
    );
    const r = await svc.foreground(args.instance, {
      command: args.command,
      cwd: ready,
      ...(args.env ? { env: args.env } : {}),
      ...(args.stdin !== undefined ? { stdin: args.stdin } : {}),
      ...(args.timeout_seconds ? { timeoutSeconds: args.timeout_seconds } : {}),
      outputBytes: bytes,
      signal,
      onLine: (line) => progress(line.slice(0, 200)),
    });
    const ask = checked.ask;
    if (ask && !r.cancelled) {
      const answer = await ask.answer(commandData(r), { signal, progress });
      const {
        stdout: _o,
        stderr: _e,
        stdout_bytes: _ob,
        stderr_bytes: _eb,
        truncated: _t,
        ...rest
      } = r;
      return {
        structured: { background: false, ...rest, answer },
        text:
          `${answer.text}\n\n(exit ${r.exit_code}; asked ${ask.who.agent} about ${answer.summarised})`,
        audit: `exit=${r.exit_code} ask=${ask.who.agent}`,
      };
    }
    return { structured: { background: false, ...r }, audit: `exit=${r.exit_code}` };
  },
});

/** exec. */
export const execTools = [exec];
