/**
 * What `isx shell <name>` runs: an interactive login shell (`bash -l`, so the profile with
 * the proxy settings and placeholders applies) as agentuser in the instance's workdir, and
 * what `isx shell --task <id>` runs: guest/presence_shell.ts's join script, as root (it
 * takes the task's join lock, then runs the agent's own resume as agentuser in a login
 * environment). The CLI owns the terminal (raw mode, resize, the title); this module only
 * decides the exec.
 *
 * @module
 */

import { type ExecOptions, type IncusClient, IsbError } from "../../rpc/base.ts";
import { JOIN_SH } from "../../guest/mod.ts";
import { GUEST_PATH, guestUser } from "../host/guest.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { AGENT_USER } from "../templates/steps.ts";

/** The exec of an interactive login shell as agentuser, and the title to show. */
export async function shellExec(
  client: IncusClient,
  name: string,
  term: { width: number; height: number; term: string },
): Promise<{ exec: ExecOptions; title: string }> {
  const inst = (await client.getInstance(name)).value;
  if (inst.status !== "Running") {
    throw new IsbError(
      "not_ready",
      `open a shell in "${name}": it is ${inst.status} (isx start ${name})`,
    );
  }
  const s = readStamps(inst.config);
  const user = await guestUser(client, name, AGENT_USER);
  const workdir = s[STAMP.workdir] || user.home;
  return {
    exec: {
      command: ["bash", "-l"],
      interactive: true,
      width: term.width,
      height: term.height,
      user: user.uid,
      group: user.gid,
      cwd: workdir,
      env: {
        HOME: user.home,
        USER: user.name,
        LOGNAME: user.name,
        SHELL: "/bin/bash",
        TERM: term.term || "xterm-256color",
        LANG: "C.UTF-8",
      },
    },
    title: `isx: ${name}`,
  };
}

/** The exec of `isx shell --task`: the join script for `taskId` on a terminal, as root. */
export function taskJoinExec(
  name: string,
  taskId: string,
  term: { width: number; height: number; term: string },
): { exec: ExecOptions; title: string } {
  if (!/^[a-z0-9][a-z0-9-]{0,63}$/.test(taskId)) {
    throw new IsbError("invalid", `"${taskId}" is not a task id`);
  }
  return {
    exec: {
      command: ["bash", "-c", JOIN_SH, "isx", AGENT_USER, taskId],
      interactive: true,
      width: term.width,
      height: term.height,
      cwd: "/",
      env: { PATH: GUEST_PATH, TERM: term.term || "xterm-256color", LANG: "C.UTF-8" },
    },
    title: `isx: ${name} task ${taskId}`,
  };
}
