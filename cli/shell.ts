/**
 * `isx shell`: owns the terminal (raw mode, the title, resizes) and the exec's streams over
 * the Incus websocket (no `incus` binary). Before the shell opens, the same preflight as
 * `isx branch` (the proxy answers, runs this build and config) and the CA repair: a guest
 * that trusts another proxy CA gets the served one first. With `--task <id>` it joins a
 * delegated agent's conversation instead (shell_task.ts finds and checks the task).
 *
 * @module
 */

import { readStamps, STAMP } from "../mcp/host/mod.ts";
import { shellExec, startIsxInstance, taskJoinExec } from "../mcp/instances/mod.ts";
import { NAME_RE } from "../mcp/templates/schema.ts";
import { type ExecOptions, type ExecSession, type IncusClient, IsbError } from "../rpc/base.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { checkProxy, repairCa } from "./instance_checks.ts";
import { withClient } from "./instances_client.ts";
import { joinableTask } from "./shell_task.ts";

/** Opens the exec; a failed websocket upgrade means the shell never started, so retry. */
async function openSession(
  client: IncusClient,
  name: string,
  exec: ExecOptions,
): Promise<ExecSession> {
  for (let attempt = 1;; attempt++) {
    try {
      return await client.exec(name, exec);
    } catch (e) {
      if (!(e instanceof IsbError) || !/websocket/.test(e.message) || attempt >= 3) throw e;
    }
  }
}

async function interact(
  client: IncusClient,
  name: string,
  ctx: CliContext,
  taskId?: string,
): Promise<number> {
  const tty = Deno.stdin.isTerminal() && Deno.stdout.isTerminal();
  const size = tty ? Deno.consoleSize() : { columns: 80, rows: 24 };
  const term = { width: size.columns, height: size.rows, term: ctx.env.TERM ?? "" };
  const { exec, title } = taskId
    ? taskJoinExec(name, taskId, term)
    : await shellExec(client, name, term);
  const session = await openSession(client, name, exec);
  const enc = new TextEncoder();
  if (Deno.stdout.isTerminal()) Deno.stdout.writeSync(enc.encode(`\x1b]0;${title}\x07`));
  if (tty) Deno.stdin.setRaw(true);
  const onResize = () => {
    const s = Deno.consoleSize();
    session.resize(s.columns, s.rows).catch(() => {});
  };
  if (tty) Deno.addSignalListener("SIGWINCH", onResize);
  const reader = Deno.stdin.readable.getReader();
  const input = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        await session.write(value);
      }
      await session.closeStdin();
    } catch { /* the session ended first */ }
  })();
  try {
    await session.stdout.pipeTo(Deno.stdout.writable, { preventClose: true });
    return await session.exit;
  } finally {
    if (tty) {
      Deno.removeSignalListener("SIGWINCH", onResize);
      Deno.stdin.setRaw(false);
    }
    session.close();
    reader.releaseLock();
    void input;
  }
}

/** `isx shell`. */
export const shellCommand: Command = {
  name: "shell",
  progs: ["isx"],
  summary: "open a login shell as agentuser in an instance",
  help: `Usage: isx shell [--no-preflight] <name>
       isx shell [--no-preflight] --task <task-id> [<name>]

Opens an interactive login shell as agentuser in the instance's working directory
(its template's workdir), with the terminal title set to the instance's name. A
stopped instance is started first (with a fresh instance secret). Exits with the
shell's exit status.

First, as isx branch does, it refuses when the proxy is not running or runs another
build or config (exit 7, naming the fixing command), and repairs the guest's trust
store when the proxy now signs with another CA than the one the instance trusts.

With --task, joins the conversation of a task delegated through isx mcp (the command
task_status gives as join_command): the agent's own interactive resume of the task's
session (claude --resume, codex resume, pi --session, opencode --session) as agentuser in
the task's directory. The instance is found among your isx mcp instances that run, or
named. While you are in, the task reads "attached" and send_message is refused; one
person at a time (a lock in the task's directory). Refused, saying what to do, for an
unknown task (exit 3), a command task (exit 1), a task still running a turn or one
someone else has joined (exit 7).

Options:
  --task <id>      join that agent task's conversation
  --no-preflight   skip the refusals (the CA repair still runs when the proxy answers)`,
  mode: () => "instances",
  run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      "no-preflight": { type: "boolean" },
      task: { type: "string" },
    });
    const task = values.task;
    if (task !== undefined && !/^[a-z0-9][a-z0-9-]{0,63}$/.test(task)) {
      throw new UsageError(`"${task}" is not a task id (task ids look like t3-ab2c)`);
    }
    if (positionals.length > 1 || (task === undefined && positionals.length !== 1)) {
      throw new UsageError(task === undefined ? "name one instance" : "name at most one instance");
    }
    const given = positionals[0];
    if (given !== undefined && !NAME_RE.test(given)) {
      throw new UsageError(`"${given}" is not an instance name`);
    }
    return withClient(ctx, async (client) => {
      // --task without a name: the task's instance, found among the running ones
      const name = given ?? await joinableTask(client, ctx, task!);
      // the instance record carries the status; /state would also gather addresses (slow)
      const { value } = await client.getInstance(name);
      const health = await checkProxy(ctx, {
        action: task ? `join task "${task}" in "${name}"` : `open a shell in "${name}"`,
        skip: values["no-preflight"] === true,
      });
      if (value.status === "Stopped") await startIsxInstance(client, name, {});
      await repairCa(ctx, client, name, health, readStamps(value.config)[STAMP.caFingerprint]);
      if (task && given) await joinableTask(client, ctx, task, given);
      return await interact(client, name, ctx, task);
    });
  },
};
