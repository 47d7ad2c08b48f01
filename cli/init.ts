/**
 * `isx init`: one-time host set-up (config and state directories, config.yaml, the
 * credentials skeleton, the proxy CA) and a check that Incus answers. Idempotent; never
 * overwrites a file. Asks before creating anything when run on a terminal without `--yes`.
 *
 * @module
 */

import { initHost, readHostConfig, SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { ensureCa } from "../proxy/mod.ts";
import { createIncusClient } from "../rpc/mod.ts";
import { parseCommandArgs } from "./args.ts";
import type { Command } from "./command.ts";
import { incusOptions } from "./incus_remote.ts";

const HELP = `Usage: isx init [--yes]

One-time host set-up, safe to repeat:
  - creates ~/.config/isx/ with config.yaml (templates search paths, the proxy's
    bridge, and the mcp: block of approved templates and limits), templates/, tools/
    and a credentials.yaml skeleton (mode 0600);
  - creates ~/.local/state/isx/ with the proxy CA (ca/ca.crt, ca/ca.key) and build/;
  - checks that Incus answers, and that a copy-on-write storage pool, the bridge and
    the base image are there, saying how to fix what is missing.
Files that exist are never changed.

Options:
  -y, --yes    do not ask before creating anything (non-interactive)

Exit status: 0 when everything is in place, 1 when Incus does not answer.`;

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/** `isx init`. */
export const initCommand: Command = {
  name: "init",
  progs: ["isx"],
  summary: "set up this host for isx (config, credentials skeleton, proxy CA, checks)",
  help: HELP,
  mode: () => "init",
  async run(rest, ctx) {
    const { values } = parseCommandArgs(rest, { yes: { type: "boolean", short: "y" } }, false);
    const { configDir, stateDir } = ctx.perm;
    if (!values.yes && Deno.stdin.isTerminal()) {
      out(`isx init will create what is missing under ${configDir} and ${stateDir}.`);
      const answer = prompt("Continue? [Y/n]");
      if (answer !== null && /^n/i.test(answer.trim())) return 1;
    }
    const client = createIncusClient({
      ...incusOptions(ctx),
      project: ctx.global.project ?? "",
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    try {
      const bridge = readHostConfig(configDir, ctx.perm.home).bridge;
      const steps = await initHost({ configDir, stateDir }, { client, bridge });
      const ca = await ensureCa(`${stateDir}/ca`);
      steps.splice(steps.findIndex((s) => s.what === "incus"), 0, {
        what: ca.certPath,
        outcome: "ok",
        note: `proxy CA ${ca.fingerprint.slice(0, 23)}…`,
      });
      let failed = false;
      for (const s of steps) {
        const mark = {
          created: "created",
          kept: "kept   ",
          ok: "ok     ",
          warning: "WARNING",
          error: "ERROR  ",
        }[
          s.outcome
        ];
        out(`${mark}  ${s.what}${s.note ? `: ${s.note}` : ""}`);
        if (s.outcome === "error") failed = true;
      }
      if (!failed) {
        out(
          "\nNext: isx build tpl-minimal (or tpl-dev, tpl-agents), then isx branch <name> --from <template>",
        );
      }
      return failed ? 1 : 0;
    } finally {
      client.close();
    }
  },
};
