/**
 * The dispatch table: every subcommand of both program names, in help order.
 *
 * @module
 */

import type { Command } from "./command.ts";
import { guestCommand } from "./guest.ts";
import { rpcCommand } from "./rpc.ts";
import { initCommand } from "./init.ts";
import { buildCommand } from "./build.ts";
import { INSTANCE_COMMANDS } from "./instances.ts";
import { proxyCommand } from "./proxy.ts";
import { mcpCommand } from "./mcp.ts";

/** All commands, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  rpcCommand,
  guestCommand,
  initCommand,
  buildCommand,
  ...INSTANCE_COMMANDS,
  proxyCommand,
  mcpCommand,
];
