/**
 * `isx shell --task <id>`: finds the instance that holds an agent task (among this user's
 * running `isx mcp` instances, one status read each, in parallel; or the named one), checks
 * it can be joined, and says what to do when it cannot: an unknown task, a command task, a
 * task still running a turn, someone else already in its conversation. The terminal itself
 * is cli/shell.ts's; the exec is mcp/instances' `taskJoinExec`.
 *
 * @module
 */

import { createTaskEngine, readStamps, STAMP } from "../mcp/mod.ts";
import { type IncusClient, IsbError } from "../rpc/base.ts";
import type { CliContext } from "./command.ts";

/** The stamp naming the host user (and state dir) whose `isx mcp` made an instance. */
const OWNER_STAMP = "mcp-owner";

/**
 * The task's instance, checked joinable; otherwise IsbError saying what to do: not_found
 * (exit 3) for an unknown task, invalid (1) for a command task, not_ready (7) for a turn in
 * progress or a person already in.
 */
export async function joinableTask(
  client: IncusClient,
  ctx: CliContext,
  taskId: string,
  named?: string,
): Promise<string> {
  const engine = createTaskEngine({ incus: client });
  let names: string[];
  const stopped: string[] = [];
  if (named) {
    names = [named];
  } else {
    const mine = `${Deno.uid() ?? 0}:${ctx.perm.stateDir}`;
    names = [];
    for (const i of await client.listInstances()) {
      const st = readStamps(i.config);
      if (st[STAMP.type] !== "instance" || st[OWNER_STAMP] !== mine) continue;
      if (i.status === "Running") names.push(i.name);
      else stopped.push(i.name);
    }
  }
  const found = (await Promise.all(names.map(async (name) => {
    const st = await engine.status(name, taskId, { tailBytes: 1, stderrTailBytes: 1 })
      .catch(() => undefined);
    return st && st.run > 0 && st.kind ? { name, st } : undefined;
  }))).filter((x) => x !== undefined);
  if (found.length === 0) {
    const where = named ? `"${named}"` : "any running instance of your isx mcp sessions";
    const hint = stopped.length
      ? ` (stopped: ${stopped.join(", ")}; isx start <name> first, or name the instance)`
      : " (task_status shows the task's instance; name it: isx shell --task <id> <instance>)";
    throw new IsbError("not_found", `join task "${taskId}": not in ${where}${hint}`);
  }
  if (found.length > 1) {
    throw new IsbError(
      "invalid",
      `join task "${taskId}": it is in ${
        found.map((f) => `"${f.name}"`).join(" and ")
      }: name one (isx shell --task ${taskId} <instance>)`,
    );
  }
  const { name, st } = found[0]!;
  if (st.kind !== "agent") {
    throw new IsbError(
      "invalid",
      `join task "${taskId}" in "${name}": it is a command task, with no conversation to join (isx shell ${name} opens a shell)`,
    );
  }
  if (st.state === "running") {
    throw new IsbError(
      "not_ready",
      `join task "${taskId}" in "${name}": it is still running turn ${st.run}; wait until it finishes (wait_any, or task_status with wait_seconds), then join`,
    );
  }
  if (st.person !== undefined) {
    throw new IsbError(
      "not_ready",
      `join task "${taskId}" in "${name}": someone is already in its conversation${
        st.person > 0 ? ` (pid ${st.person})` : ""
      }; wait until they leave`,
    );
  }
  return name;
}
