/**
 * What `isx shell <name>` runs: an interactive login shell (`bash -l`, so the profile with
 * the proxy settings and placeholders applies) as agentuser in the instance's workdir. The
 * CLI owns the terminal (raw mode, resize, the title); this module only decides the exec.
 *
 * @module
 */

import { type ExecOptions, type IncusClient, IsbError } from "../../rpc/base.ts";
import { guestUser } from "../host/guest.ts";
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
