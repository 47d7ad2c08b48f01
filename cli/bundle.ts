/**
 * Entry of the single-file bundle of this program that `isx build` delivers into guests
 * (`mcp/templates/program.ts`). `cli/commands.ts` imports a command's module by a specifier
 * computed at run time (so Deno does not read every command at every start), which a bundler
 * cannot follow; this entry imports every command module statically instead and registers
 * them, then runs the CLI as main.ts does.
 *
 * @module
 */

import * as build from "./build.ts";
import * as dashboard from "./dashboard.ts";
import * as guest from "./guest.ts";
import * as incusRemote from "./incus_remote.ts";
import * as init from "./init.ts";
import * as instances from "./instances.ts";
import * as list from "./list.ts";
import * as mcp from "./mcp.ts";
import * as pool from "./pool.ts";
import * as mcpBackend from "./mcp_backend.ts";
import * as proxy from "./proxy.ts";
import * as rpc from "./rpc.ts";
import * as shell from "./shell.ts";
import * as rpcLib from "../rpc/mod.ts";
import * as templatesLoad from "../mcp/templates/load.ts";
import { METHODS } from "../rpc/server/methods/mod.ts";
import { registerMethods } from "../rpc/server/mod.ts";
import { registerModules } from "./commands.ts";
import { runCli } from "./mod.ts";

/** Every command module, by its name in the dispatch table, and the lazily imported ones. */
export const BUNDLED: Record<string, Record<string, unknown>> = {
  "build.ts": build,
  "dashboard.ts": dashboard,
  "guest.ts": guest,
  "incus_remote.ts": incusRemote,
  "init.ts": init,
  "instances.ts": instances,
  "list.ts": list,
  "mcp.ts": mcp,
  "pool.ts": pool,
  "mcp_backend.ts": mcpBackend,
  "proxy.ts": proxy,
  "rpc.ts": rpc,
  "shell.ts": shell,
  "../rpc/mod.ts": rpcLib,
  "../mcp/templates/load.ts": templatesLoad,
};
registerModules(BUNDLED);
registerMethods(METHODS); // isb rpc's method table, which rpc/server loads by a computed specifier

if (import.meta.main) Deno.exit(await runCli(Deno.args));
