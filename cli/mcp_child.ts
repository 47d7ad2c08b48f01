/**
 * How the proxy starts a coordinator's `isx mcp --caller-instance <name>`
 * (proxy/mcp_endpoint/, issue 20): this same program, under the `mcp` mode's own grants of
 * the one permission table (cli/permissions.ts), never the proxy's. With `deno run` the
 * child is started with exactly those grants (plus env, which it may read only in the
 * clean environment given here: the user's directories and the launcher's commit, and which
 * it drops on entering the mode), so it can never read credentials.yaml or the CA key, and
 * the proxy keeps only the right to run this program (its `run` grant names the runtime).
 * A compiled binary carries one flag set (the union) and narrows to the same grants in
 * `enterMode` before it reads any input, as every `isx mcp` does.
 *
 * @module
 */

import type { ChildSpec } from "../proxy/mod.ts";
import type { CliContext } from "./command.ts";
import { grantFlags, PERMISSIONS } from "./permissions.ts";

/** The child's spec for this install (directories, socket, remote, program). */
export function mcpChildSpec(ctx: CliContext): ChildSpec {
  const p = ctx.perm;
  const up = (dir: string) => dir.replace(/\/[^/]+$/, "");
  const env: Record<string, string> = {
    HOME: p.home,
    XDG_CONFIG_HOME: up(p.configDir),
    XDG_STATE_HOME: up(p.stateDir),
    XDG_CACHE_HOME: up(p.cacheDir),
    TMPDIR: p.tmp,
    ISX_PROG: "isx",
  };
  if (ctx.env.ISX_GIT_SHA) env.ISX_GIT_SHA = ctx.env.ISX_GIT_SHA;
  // the runtime's module cache, where it is not under the user's cache directory
  if (ctx.env.DENO_DIR) env.DENO_DIR = ctx.env.DENO_DIR;
  if (p.incusConf) env.INCUS_CONF = p.incusConf;
  const compiled = !/\/deno$/.test(p.execPath);
  const run = compiled ? [] : [
    "run",
    "--quiet",
    "--cached-only",
    "--config",
    `${p.programDir}/deno.json`,
    ...grantFlags({ ...PERMISSIONS.mcp(p), env: true }),
    `${p.programDir}/main.ts`,
  ];
  const global = ["--socket", ctx.global.socket];
  if (ctx.global.remote !== undefined) global.push("--remote", ctx.global.remote);
  if (ctx.global.target) global.push("--target", ctx.global.target);
  return {
    command: p.execPath,
    env,
    cwd: p.home,
    args: (instance, project) => [
      ...run,
      ...global,
      ...(project ? ["--project", project] : []),
      "mcp",
      "--caller-instance",
      instance,
    ],
  };
}
