/**
 * `isx build <template>...`: loads the definitions, gathers what guests get from the host
 * (the proxy CA certificate, the gateway and ports, the intercepted domains) and the
 * program to deliver for the guest runner mode, then builds with streamed progress.
 *
 * @module
 */

import {
  bridgeGateway,
  type BuildEvent,
  buildTemplates,
  loadDefinitions,
  readHostConfig,
  resolveChain,
  SLOW_DAEMON_MS,
} from "../mcp/mod.ts";
import { DEFAULT_HOSTS, loadProxyConfig, type ProxyConfig } from "../proxy/mod.ts";
import { createIncusClient, type IncusClient, IsbError } from "../rpc/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { contextFrom, NPM_PASS_ENV, unionFlags } from "./permissions.ts";
import { warnProxy } from "./instance_checks.ts";
import { incusOptions } from "./incus_remote.ts";

const HELP = `Usage: isx build [--with-parents] [--out-of-sync] [-q] <template>...
       isx build --out-of-sync

Builds templates into stopped Incus instances of the same name. A template's missing
parents are built first; the parent is copied, the template's steps run (apt packages,
tools, files, repos, scripts) with their output streamed, the instance is stopped and
stamped with its type, definition hash, parent build and the isx version. It warns first
(never refuses) when the proxy its instances will need is down or stale.

Options:
  --with-parents   rebuild every parent too, not only the missing ones
  --out-of-sync    rebuild only what changed since it was built, and everything under
                   it; without names: every built template
  -q, --quiet      show the steps, not their output

Packages from npm are fetched on the host and kept in ~/.cache/isx/downloads/, like the
.deb files apt downloads in guests, so a rebuild fetches nothing twice. A failed build
keeps its half-built instance (<template>-build) and says how to reach it. Logs:
~/.local/state/isx/build/.`;

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

/** The flags the guest launcher starts isx with: the union of modes, for a guest user. */
export function guestFlags(): string[] {
  const env: Record<string, string> = { HOME: "/home/agentuser" };
  return unionFlags(contextFrom((k) => env[k], {
    cwd: "/home/agentuser",
    uid: 1000,
    programDir: "/usr/local/lib",
    execPath: "/usr/local/bin/deno",
    socket: "/var/lib/incus/unix.socket",
  }));
}

/** Every domain the proxy intercepts under this config (guests reach them directly). */
export function interceptedDomains(config: ProxyConfig): string[] {
  const hosts = {
    ...DEFAULT_HOSTS,
    ...Object.fromEntries(
      Object.entries(config.hosts ?? {}).filter(([, v]) => v !== undefined),
    ),
  } as Record<string, readonly string[]>;
  return [...new Set([...Object.values(hosts).flat(), ...config.domains])].sort();
}

/** Reads the CA certificate (never the key) or says to run isx init. */
export function readCaCert(stateDir: string): string {
  const path = `${stateDir}/ca/ca.crt`;
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new IsbError("not_found", `read the proxy CA "${path}": missing: run isx init`);
    }
    throw e;
  }
}

function printer(quiet: boolean): (e: BuildEvent) => void {
  return (e) => {
    switch (e.kind) {
      case "plan":
        out(
          e.builds.length
            ? `Building: ${e.builds.map((b) => `${b.name} (${b.reason})`).join(", ")}`
            : "Nothing to build: every template is current",
        );
        break;
      case "start":
        out(`==> ${e.template}: building in ${e.instance} (log: ${e.log})`);
        break;
      case "step":
        out(`[${e.template} ${e.index}/${e.total}] ${e.label}`);
        break;
      case "output":
        if (!quiet) out(`    ${e.line}`);
        break;
      case "note":
        out(`    ${e.line}`);
        break;
      case "done":
        out(`==> ${e.template}: built in ${(e.ms / 1000).toFixed(1)} s`);
        break;
    }
  };
}

/** Builds with the CLI's context (shared by the command and the benchmark). */
export async function runBuild(
  ctx: CliContext,
  client: IncusClient,
  opts: {
    names: string[];
    withParents?: boolean;
    outOfSync?: boolean;
    onEvent: (e: BuildEvent) => void;
  },
): Promise<number> {
  const { configDir, stateDir, cacheDir, cwd, home } = ctx.perm;
  const host = readHostConfig(configDir, home);
  const defs = loadDefinitions({
    configDir,
    searchPaths: host.searchPaths,
    cwd,
    home,
    protectedPaths: [stateDir, ctx.perm.isbStateDir],
  });
  for (const n of opts.names) resolveChain(defs, n); // refuse bad definitions before Incus
  const proxy = await loadProxyConfig(`${configDir}/config.yaml`);
  const gateway = proxy.gateway ?? await bridgeGateway(client, proxy.bridge);
  const results = await buildTemplates(defs, opts.names, {
    client,
    facts: {
      caPem: readCaCert(stateDir),
      gateway,
      domains: interceptedDomains(proxy),
      proxyPort: proxy.ports.forward,
    },
    cacheDir,
    logDir: `${stateDir}/build`,
    hostEnv: npmHostEnv(ctx.env, home),
    program: { execPath: ctx.perm.execPath, programDir: ctx.perm.programDir, flags: guestFlags() },
    onEvent: opts.onEvent,
    ...(opts.withParents ? { withParents: true } : {}),
    ...(opts.outOfSync ? { outOfSync: true } : {}),
  });
  return results.length;
}

/** The environment `npm` runs with on the host: PATH, HOME and {@link NPM_PASS_ENV}. */
export function npmHostEnv(env: Record<string, string | undefined>, home: string) {
  const out: Record<string, string> = {
    PATH: env.PATH || "/usr/local/bin:/usr/bin:/bin",
    HOME: env.HOME || home,
  };
  for (const k of NPM_PASS_ENV) {
    const v = env[k];
    if (v) out[k] = v;
  }
  return out;
}

/** `isx build`. */
export const buildCommand: Command = {
  name: "build",
  progs: ["isx"],
  summary: "build templates into stopped instances (missing parents first)",
  help: HELP,
  mode: () => "build",
  async run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      "with-parents": { type: "boolean" },
      "out-of-sync": { type: "boolean" },
    });
    if (!positionals.length && !values["out-of-sync"]) {
      throw new UsageError("name at least one template (or use --out-of-sync)");
    }
    const client = createIncusClient({
      ...incusOptions(ctx),
      project: ctx.global.project ?? "",
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    try {
      await warnProxy(ctx);
      await runBuild(ctx, client, {
        names: positionals,
        withParents: values["with-parents"] ?? false,
        outOfSync: values["out-of-sync"] ?? false,
        onEvent: printer(ctx.global.quiet),
      });
      return 0;
    } finally {
      client.close();
    }
  },
};
