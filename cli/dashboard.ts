/**
 * `isx dashboard`: prints the address of the running proxy's live dashboard
 * (proxy/dashboard), `http://127.0.0.1:<ops port>/dashboard?token=<page token>`. The page
 * token derives from the token the proxy wrote to its 0600 state directory, so only this
 * user can make the address, and it changes with every proxy start. Opens nothing unless
 * `--open` (then `xdg-open`, which the permission table names).
 *
 * @module
 */

import { proxyHealthUrl, readHostConfig } from "../mcp/host/config.ts";
import { readProxyHealth } from "../mcp/host/proxy_check.ts";
import { dashboardToken, readRunFiles } from "../proxy/mod.ts";
import { IsbError } from "../rpc/errors.ts";
import { parseCommandArgs } from "./args.ts";
import type { Command } from "./command.ts";

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/** `isx dashboard`. */
export const dashboardCommand: Command = {
  name: "dashboard",
  progs: ["isx"],
  summary: "print the address of the live dashboard on this host (instances, tasks, tokens)",
  help: `Usage: isx dashboard [--open]

Prints the address of the running proxy's dashboard: a read-only page on 127.0.0.1 that
shows instances, tasks, tokens over the last hour, traffic, refusals with their fixes and
the proxy's health, updated live. The address carries a token (it changes at every proxy
start); the first visit trades it for a cookie. Only this host can open it: the page
answers on loopback, to a Host of 127.0.0.1:<port> or localhost:<port>, never to an
instance. docs/dashboard.md is the guide.

Options:
  --open   also open it in the desktop's browser (xdg-open)`,
  mode: () => "proxy-ctl",
  async run(rest, ctx) {
    const { values } = parseCommandArgs(rest, { open: { type: "boolean" } }, false);
    const base = proxyHealthUrl(readHostConfig(ctx.perm.configDir, ctx.perm.home));
    const read = await readProxyHealth(base);
    if (read.kind !== "ok") {
      throw new IsbError(
        "connect",
        `open dashboard: no isx proxy answers at ${base}; start it: isx proxy start`,
      );
    }
    const { pid, token } = await readRunFiles(ctx.perm.stateDir);
    if (!token || pid !== read.health.pid) {
      throw new IsbError(
        "forbidden",
        `open dashboard: the proxy at ${base} (pid ${read.health.pid}) was not started by this user's isx proxy start`,
      );
    }
    const url = `${base}/dashboard?token=${await dashboardToken(token)}`;
    out(url);
    if (values.open) {
      const child = new Deno.Command("xdg-open", {
        args: [url],
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).spawn();
      const status = await child.status;
      if (!status.success) {
        throw new IsbError("io", `open dashboard: xdg-open exited with code ${status.code}`);
      }
    }
    return 0;
  },
};
