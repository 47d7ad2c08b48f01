/**
 * The dispatch table: every subcommand of both program names, in help order.
 *
 * @module
 */

import type { Command } from "./command.ts";
import { guestCommand } from "./guest.ts";
import { rpcCommand } from "./rpc.ts";

/** All commands, in the order `--help` lists them. */
export const COMMANDS: readonly Command[] = [
  rpcCommand,
  guestCommand,
];
