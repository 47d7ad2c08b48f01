/**
 * `isx guest`: the mode that runs inside an instance. `isx guest run` records one command as a
 * task under /var/lib/isx/tasks (see guest/task_runner.ts); `isx guest status` prints a
 * task's recorded state. Runs under the `guest` permission mode: no network at all.
 *
 * @module
 */

import { IsbError } from "../rpc/errors.ts";
import { GUEST_TASKS_ROOT, parseTaskState, runTask } from "../guest/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { Command } from "./command.ts";

const HELP = `Usage: isx guest run [--id ID] [--root DIR] [--cwd DIR] -- COMMAND [ARG...]
       isx guest status --id ID [--root DIR]

Runs inside an instance. \`run\` executes COMMAND as a recorded task: its state, events,
stdout and stderr go to ROOT/ID/ (ROOT default ${GUEST_TASKS_ROOT}); exits with its code.
\`status\` prints the task's state.json.

Options:
  --id ID      task id, 1-64 of A-Za-z0-9._:- (default: a random one, printed on stderr)
  --root DIR   tasks root (default ${GUEST_TASKS_ROOT})
  --cwd DIR    working directory of the command`;

/** `isx guest`. */
export const guestCommand: Command = {
  name: "guest",
  progs: ["isx"],
  summary: "run a recorded task inside an instance (guest side)",
  help: HELP,
  mode: () => "guest",
  async run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      id: { type: "string" },
      root: { type: "string" },
      cwd: { type: "string" },
    });
    const [sub, ...argv] = positionals;
    const root = values.root ?? GUEST_TASKS_ROOT;
    if (sub === "status") {
      if (!values.id) throw new UsageError("status needs --id");
      let text: string;
      try {
        text = await Deno.readTextFile(`${root}/${values.id}/state.json`);
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) {
          throw new IsbError("not_found", `task ${values.id} not found in ${root}`);
        }
        throw e;
      }
      Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(parseTaskState(text)) + "\n"));
      return 0;
    }
    if (sub !== "run") throw new UsageError(`unknown guest subcommand "${sub ?? ""}"`);
    if (argv.length === 0) throw new UsageError("run needs a command after --");
    const id = values.id ?? crypto.randomUUID();
    if (!values.id) Deno.stderr.writeSync(new TextEncoder().encode(`task ${id}\n`));
    try {
      return await runTask({
        id,
        argv,
        root,
        env: { ...ctx.env },
        ...(values.cwd ? { cwd: values.cwd } : {}),
      });
    } catch (e) {
      if (e instanceof TypeError) throw new UsageError(e.message);
      throw e;
    }
  },
};
