/**
 * The dispatch table: every subcommand of both program names, in help order, with what
 * `--help` lists (name, programs, summary) and how to load the command's module. Modules
 * are imported only when their command runs (or prints its own help): `isb rpc` never
 * loads the MCP layer, the proxy or the templates, and `isx --help` loads no command at
 * all. `cli/mod_test.ts` checks each entry against the command its module exports.
 *
 * The specifier of each `import()` is computed at run time on purpose: Deno reads and parses
 * every statically analyzable `import("./x.ts")` (and its whole graph) before the program
 * starts, which would load every command at every start. Such an import needs read access to
 * the program's directory (every launch grants it) and, in a compiled binary, the module
 * embedded with `--include` (scripts/compile.ts includes every {@link CommandEntry.module}).
 * A bundler cannot follow one either: the bundle's entry (`cli/bundle.ts`) imports the
 * modules statically and hands them over with {@link registerModules}.
 *
 * @module
 */

import { moduleUrl } from "../rpc/prebuilt.ts";
import type { Command, Prog } from "./command.ts";

/** One row of the table: enough for the main help, and the loader of the command itself. */
export interface CommandEntry {
  name: string;
  /** The program names it answers to. */
  progs: readonly Prog[];
  summary: string;
  /** The command's module, relative to `cli/`. */
  module: string;
  /** Imports the command's module and returns the command. */
  load(): Promise<Command>;
}

type Pick = (m: Record<string, unknown>) => unknown;

const REGISTERED = new Map<string, Record<string, unknown>>();

/** Hands over command modules imported statically (by `cli/bundle.ts`): loaders use them. */
export function registerModules(modules: Record<string, Record<string, unknown>>): void {
  for (const [name, m] of Object.entries(modules)) REGISTERED.set(name, m);
}

/**
 * Modules besides the commands that are imported by {@link importModule} (so after start):
 * the remote resolver, the session half of `isx mcp` (loaded after the handshake), the
 * library behind `isb rpc` (loaded after its hello) and `isx branch`'s definition loader.
 * `cli/bundle.ts` registers them and `scripts/compile.ts` embeds them, as the commands.
 */
export const LAZY_MODULES: readonly string[] = [
  "incus_remote.ts",
  "mcp_backend.ts",
  "../rpc/mod.ts",
  "../mcp/templates/load.ts", // isx branch's definitions, once its first requests are sent
];

/** Imports a module of `cli/` by a computed specifier (see above), or takes the registered one. */
export async function importModule<T>(module: string): Promise<T> {
  const registered = REGISTERED.get(module);
  if (registered) return registered as T;
  const source = new URL(`./${module}`, import.meta.url).href;
  // its path from the root (`../rpc/mod.ts` is `rpc/mod.ts`), for the pre-built program
  const path = new URL(`cli/${module}`, "file:///").pathname.slice(1);
  return await import(moduleUrl(path, source)) as T;
}

function row(
  name: string,
  progs: readonly Prog[],
  summary: string,
  how: { module: string; pick: Pick },
): CommandEntry {
  return {
    name,
    progs,
    summary,
    module: how.module,
    async load() {
      return how.pick(await importModule<Record<string, unknown>>(how.module)) as Command;
    },
  };
}

function named(module: string, exported: string) {
  return { module, pick: (m: Record<string, unknown>) => m[exported] };
}

function instance(name: string) {
  return {
    module: "instances.ts",
    pick: (m: Record<string, unknown>) =>
      (m.INSTANCE_COMMANDS as readonly Command[]).find((c) => c.name === name),
  };
}

/** All commands, in the order `--help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  row(
    "rpc",
    ["isb", "isx"],
    "serve the SDK protocol (line-delimited JSON) on stdin/stdout",
    named("rpc.ts", "rpcCommand"),
  ),
  row(
    "guest",
    ["isx"],
    "run a recorded task inside an instance (guest side)",
    named("guest.ts", "guestCommand"),
  ),
  row(
    "init",
    ["isx"],
    "set up this host for isx (config, credentials skeleton, proxy CA, checks)",
    named("init.ts", "initCommand"),
  ),
  row(
    "build",
    ["isx"],
    "build templates into stopped instances (missing parents first)",
    named("build.ts", "buildCommand"),
  ),
  row(
    "branch",
    ["isx"],
    "make a running copy-on-write instance of a built template",
    instance("branch"),
  ),
  row("list", ["isx"], "list templates and instances made by isx", named("list.ts", "listCommand")),
  row(
    "start",
    ["isx"],
    "start instances (each start gets a fresh instance secret)",
    instance("start"),
  ),
  row("stop", ["isx"], "stop instances", instance("stop")),
  row("destroy", ["isx"], "delete instances (or templates, or failed builds)", instance("destroy")),
  row(
    "shell",
    ["isx"],
    "open a login shell as agentuser in an instance",
    named("shell.ts", "shellCommand"),
  ),
  row(
    "proxy",
    ["isx"],
    "the credential-injecting, counting proxy (run, start, stop, status, logs, activity)",
    named("proxy.ts", "proxyCommand"),
  ),
  row(
    "dashboard",
    ["isx"],
    "print the address of the live dashboard on this host (instances, tasks, tokens)",
    named("dashboard.ts", "dashboardCommand"),
  ),
  row(
    "pool",
    ["isx"],
    "warm pools of started instances that create_instance claims (show, keep, fill, drain)",
    named("pool.ts", "poolCommand"),
  ),
  row(
    "mcp",
    ["isx"],
    "serve MCP on stdin/stdout: agents and programs run instances, commands, tasks",
    named("mcp.ts", "mcpCommand"),
  ),
];
