/**
 * `isx list`, apart from the other instance commands (cli/instances.ts): it is run often,
 * often by scripts, and needs only the listing, the proxy's health and config.yaml's ops
 * address, not the template loader, branch, preflight or CA repair that module carries
 * (issue 11: start-up ≤ 80 ms + the Incus call).
 *
 * @module
 */

import { proxyHealthUrl, readHostConfig } from "../mcp/host/config.ts";
import { pemFingerprint, readProxyHealth } from "../mcp/host/proxy_check.ts";
import { formatTable, listIsxInstances } from "../mcp/instances/list.ts";
import { mcpOwner, SessionLocks } from "../mcp/host/session_locks.ts";
import { parseCommandArgs } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { withClient } from "./instances_client.ts";

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/** The fingerprint of the CA guests must trust now: the proxy's, else the file's. */
async function currentCa(ctx: CliContext): Promise<string | undefined> {
  const read = await readProxyHealth(
    proxyHealthUrl(readHostConfig(ctx.perm.configDir, ctx.perm.home)),
  );
  if (read.kind === "ok") return read.health.caFingerprint;
  try {
    return await pemFingerprint(await Deno.readTextFile(`${ctx.perm.stateDir}/ca/ca.crt`));
  } catch {
    return undefined; // no CA yet (isx init) or unreadable: nothing to compare
  }
}

/** `isx list`. */
export const listCommand: Command = {
  name: "list",
  progs: ["isx"],
  summary: "list templates and instances made by isx",
  help: `Usage: isx list [--json]

Lists every template, build instance and instance isx made, with status, template,
IPv4 address and network mode. Records end with mcp_state (held, orphaned, kept, pool
for an unclaimed warm-pool member (isx pool), or null), mcp_purpose and ca_outdated (trusts another proxy CA than the current one: the
one the proxy serves, else ~/.local/state/isx/ca/ca.crt; null when unknown). The table
shows an MCP column only when an instance has MCP stamps, and a CA column only when a
template (rebuild it: isx build) or instance (isx start repairs it) is out of date.

Options:
  --json   one JSON array of records instead of the table`,
  mode: () => "instances",
  run(rest, ctx) {
    const { values } = parseCommandArgs(rest, { json: { type: "boolean" } }, false);
    return withClient(ctx, async (client) => {
      // a holder of this user's state dir that was killed shows as orphaned at once
      const locks = new SessionLocks(`${ctx.perm.stateDir}/mcp/sessions`);
      const mine = mcpOwner(Deno.uid() ?? 0, ctx.perm.stateDir);
      const rows = await listIsxInstances(
        client,
        currentCa(ctx),
        (session, owner) => owner !== mine || locks.alive(session),
      );
      if (values.json) out(JSON.stringify(rows, null, 2));
      else {out(
          rows.length ? formatTable(rows) : "No templates or instances yet (isx build tpl-minimal)",
        );}
      return 0;
    });
  },
};
