/**
 * The Incus client of the instance commands (`isx branch|list|start|stop|destroy|shell`):
 * made from the global options with the slow-daemon timeout, closed after the command.
 *
 * @module
 */

import { SLOW_DAEMON_MS } from "../mcp/host/guest.ts";
import { createIncusClient, type IncusClient } from "../rpc/base.ts";
import type { CliContext } from "./command.ts";
import { incusOptions } from "./incus_remote.ts";

/** Runs `fn` with a client for the command's socket and project, then closes it. */
export async function withClient(
  ctx: CliContext,
  fn: (c: IncusClient) => Promise<number>,
): Promise<number> {
  const client = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}
