/**
 * The dispatch table: every subcommand of both program names, in help order, with what
 * `--help` lists (name, programs, summary) and how to load the command's module. Modules
 * are imported only when their command runs (or prints its own help): `isb rpc` never
 * loads the MCP layer, the proxy or the templates, and `isx --help` loads no command at
 * all. `cli/mod_test.ts` checks each entry against the command its module exports.
 *
 * @module
 */

import type { Command, Prog } from "./command.ts";

/** One row of the table: enough for the main help, and the loader of the command itself. */
export interface CommandEntry {
  name: string;
  /** The program names it answers to. */
  progs: readonly Prog[];
  summary: string;
  /** Imports the command's module and returns the command. */
  load(): Promise<Command>;
}

async function instance(name: string): Promise<Command> {
  const { INSTANCE_COMMANDS } = await import("./instances.ts");
  return INSTANCE_COMMANDS.find((c) => c.name === name)!;
}

/** All commands, in the order `--help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "rpc",
    progs: ["isb", "isx"],
    summary: "serve the SDK protocol (line-delimited JSON) on stdin/stdout",
    load: async () => (await import("./rpc.ts")).rpcCommand,
  },
  {
    name: "guest",
    progs: ["isx"],
    summary: "run a recorded task inside an instance (guest side)",
    load: async () => (await import("./guest.ts")).guestCommand,
  },
  {
    name: "init",
    progs: ["isx"],
    summary: "set up this host for isx (config, credentials skeleton, proxy CA, checks)",
    load: async () => (await import("./init.ts")).initCommand,
  },
  {
    name: "build",
    progs: ["isx"],
    summary: "build templates into stopped instances (missing parents first)",
    load: async () => (await import("./build.ts")).buildCommand,
  },
  {
    name: "branch",
    progs: ["isx"],
    summary: "make a running copy-on-write instance of a built template",
    load: () => instance("branch"),
  },
  {
    name: "list",
    progs: ["isx"],
    summary: "list templates and instances made by isx",
    load: () => instance("list"),
  },
  {
    name: "start",
    progs: ["isx"],
    summary: "start instances (each start gets a fresh instance secret)",
    load: () => instance("start"),
  },
  { name: "stop", progs: ["isx"], summary: "stop instances", load: () => instance("stop") },
  {
    name: "destroy",
    progs: ["isx"],
    summary: "delete instances (or templates, or failed builds)",
    load: () => instance("destroy"),
  },
  {
    name: "shell",
    progs: ["isx"],
    summary: "open a login shell as agentuser in an instance",
    load: async () => (await import("./shell.ts")).shellCommand,
  },
  {
    name: "proxy",
    progs: ["isx"],
    summary: "the credential-injecting, counting proxy (run, start, stop, status, logs, activity)",
    load: async () => (await import("./proxy.ts")).proxyCommand,
  },
  {
    name: "mcp",
    progs: ["isx"],
    summary: "serve MCP on stdin/stdout: agents and programs run instances, commands, tasks",
    load: async () => (await import("./mcp.ts")).mcpCommand,
  },
];
