/**
 * `isx proxy run`: the proxy in the foreground, and the tools' `proxy:` rules it starts
 * with. This is the module graph of the long-running proxy process, so it imports the proxy
 * and rpc's leaf modules, never `mcp/mod.ts` or `rpc/mod.ts`: what a process imports stays
 * resident (issue 11). The one narrow entry of the MCP layer it needs (mcp/tool_rules.ts,
 * which checks tools with zod, ~11 MiB resident) is imported only when a tool
 * can exist: YAML files in the user's `tools/`, or search paths in config.yaml.
 *
 * @module
 */

import {
  type CustomRule,
  DEFAULT_COMMAND_TTL_MS,
  holdRunLock,
  newToken,
  removeRunFiles,
  Secret,
  startHostProxy,
  taskReportToken,
  type Value,
  writeRunFiles,
} from "../proxy/mod.ts";
import { isLogLevel, log, setLogLevel, setLogSink } from "../rpc/log.ts";
import { parseYaml } from "../rpc/base.ts";
import type { CliContext } from "./command.ts";
import { incusOptions } from "./incus_options.ts";
import { mcpChildSpec } from "./mcp_child.ts";
import type { Values } from "./proxy_view.ts";

const enc = new TextEncoder();

/**
 * Whether a tool can declare proxy rules here: a YAML file in `<configDir>/tools`, or
 * search paths (or a config.yaml this reader cannot read: the full reader then says why).
 */
export function mayHaveTools(configDir: string): boolean {
  try {
    for (const e of Deno.readDirSync(`${configDir}/tools`)) {
      if (/\.ya?ml$/.test(e.name)) return true;
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) return true;
  }
  let doc: unknown;
  try {
    doc = parseYaml(Deno.readTextFileSync(`${configDir}/config.yaml`));
  } catch (e) {
    return !(e instanceof Deno.errors.NotFound);
  }
  const tpl = (doc as { templates?: unknown } | null)?.templates;
  const paths = (tpl as { searchPaths?: unknown } | null | undefined)?.searchPaths;
  return paths !== undefined && paths !== null && !(Array.isArray(paths) && !paths.length);
}

/**
 * The `proxy:` rules of the user's and search paths' tools, values wrapped as secrets at
 * once. A tools directory that cannot be read or holds an invalid tool is logged and left
 * out: the proxy still starts, and those domains get no credentials (nothing leaks).
 */
export async function toolRules(ctx: CliContext): Promise<CustomRule[]> {
  const { configDir, home } = ctx.perm;
  if (!mayHaveTools(configDir)) return [];
  const { loadToolProxyRules, readHostConfig } = await import("../mcp/tool_rules.ts");
  let searchPaths: string[] = [];
  try {
    searchPaths = readHostConfig(configDir, home).searchPaths;
  } catch (e) {
    log.warn("proxy: search paths not read for tools' proxy rules", {
      error: (e as Error).message,
    });
  }
  const skip = (dir: string, e: Error) =>
    log.warn("proxy: tools' proxy rules left out", { dir, error: e.message });
  return loadToolProxyRules({ configDir, searchPaths }, skip).map((r): CustomRule => {
    const value: Value = typeof r.value === "string" ? new Secret(r.value) : {
      kind: "command",
      argv: r.value.command,
      ttlMs: r.value.ttlMs ?? DEFAULT_COMMAND_TTL_MS,
    };
    if (r.kind === "header") return { domain: r.domain, kind: "header", header: r.header, value };
    if (r.kind === "basic") return { domain: r.domain, kind: "basic", user: r.user, value };
    return { domain: r.domain, kind: "bearer", value };
  });
}

/** Serves in the foreground until SIGINT/SIGTERM or `POST /shutdown`; returns the exit status. */
export async function runForeground(ctx: CliContext, values: Values): Promise<number> {
  const level = ctx.env.ISX_LOG;
  setLogLevel(level && isLogLevel(level) ? level : "info");
  let file: Deno.FsFile | undefined;
  if (typeof values["log-file"] === "string") {
    file = await Deno.open(values["log-file"], { append: true, create: true, mode: 0o600 });
    const f = file;
    setLogSink((line) => f.writeSync(enc.encode(line + "\n")));
  }
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  const token = newToken();
  // a previous proxy of this home still cleaning up (a restart) finishes before this one
  // writes the bridge DNS and its nft tables (proxy/host/_runfiles.ts)
  const lock = await holdRunLock(ctx.perm.stateDir, {
    onWait: () => log.info("proxy: waiting for the previous proxy of this home to finish stopping"),
  });
  let proxy;
  try {
    proxy = await startHostProxy({
      ...ctx.perm,
      socket: ctx.global.socket,
      incus: incusOptions(ctx),
      gitSha: ctx.env.ISX_GIT_SHA || null,
    }, {
      shutdown: { token, onShutdown: () => stop() },
      toolRules: await toolRules(ctx),
      // coordinators reach isx mcp at mcp.isx.internal (issue 20)
      mcp: mcpChildSpec(ctx),
    });
  } catch (e) {
    // `isx proxy start` shows this line: the background proxy's stderr goes nowhere
    log.error("proxy: start failed", { error: (e as Error).message });
    lock.release();
    file?.close();
    throw e;
  }
  await writeRunFiles(ctx.perm.stateDir, Deno.pid, token, await taskReportToken(token));
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, stop);
  log.info("proxy: started", { pid: Deno.pid, ca: proxy.handle.caFingerprint });
  await stopped;
  for (const s of signals) Deno.removeSignalListener(s, stop);
  log.info("proxy: stopping", { pid: Deno.pid });
  // The files go first: once /health stops answering, `status` must say "not running".
  await removeRunFiles(ctx.perm.stateDir, Deno.pid);
  await proxy.close();
  log.info("proxy: stopped", { pid: Deno.pid });
  lock.release();
  file?.close();
  return 0;
}
