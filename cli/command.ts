/**
 * What a subcommand is: its names, its help, the permission mode it runs in, and `run`.
 * Each command module exports one or more of these; `cli/commands.ts` lists them.
 *
 * @module
 */

import type { GlobalFlags } from "./args.ts";
import type { Mode, PermContext } from "./permissions.ts";

/** Which program name a command answers to. */
export type Prog = "isb" | "isx";

/**
 * Where this invocation's incusd is, where new instances go, and the remote's default project
 * (cli/incus_remote.ts).
 */
export type IncusPlace =
  // rpc's IncusEndpoint, spelled out: a type import of rpc/mod.ts would join main.ts's graph
  & ({ socket: string } | { url: string; tls: { cert: string; key: string; caCerts?: string[] } })
  & { target?: string; project?: string };

/** Everything a command gets from the composition root. */
export interface CliContext {
  prog: Prog;
  global: GlobalFlags;
  perm: PermContext;
  /** Environment values captured before the mode dropped env access. */
  env: Readonly<Record<string, string>>;
  /** This invocation's incusd (`--remote`, `--target`); the socket of `global` when absent. */
  incus?: IncusPlace;
}

/** One subcommand. */
export interface Command {
  name: string;
  /** The program names it answers to. */
  progs: readonly Prog[];
  summary: string;
  /** Full `--help` text, usage line first. */
  help: string;
  /** The mode to enter for these arguments (decided before any input is read). */
  mode(rest: string[]): Mode;
  /** Runs the command; returns the exit code. Throws IsbError/UsageError for failures. */
  run(rest: string[], ctx: CliContext): Promise<number>;
}
