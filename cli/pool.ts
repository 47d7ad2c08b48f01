/**
 * `isx pool [show|keep|fill|drain]`: the warm pools of `warm-pool:` (mcp/pool/). `keep` is
 * the keeper, a long-running host process of its own (mode `pool`: the Incus socket, the
 * user's definitions and mcp settings read-only, the CA certificate, its lock and log under
 * `<state>/pool`; never credentials nor the CA key, which only the proxy reads). `isx proxy
 * install` starts it at boot beside the proxy. Two keepers never run (the lock); with none,
 * the pools stay empty and creates go the cold way.
 *
 * @module
 */

import {
  type ProxyHealth,
  proxyHealthUrl,
  readHostConfig,
  readProxyHealth,
} from "../mcp/host/mod.ts";
import { readMcpConfig } from "../mcp/session/mod.ts";
import {
  cleanLeftovers,
  drainPools,
  keeperRunning,
  keepPass,
  listMembers,
  type PoolDeps,
  poolViews,
  takeKeeperLock,
} from "../mcp/pool/mod.ts";
import { loadDefinitions } from "../mcp/templates/load.ts";
import { loadProxyConfig } from "../proxy/config/host_config.ts";
import { createIncusClient, IsbError } from "../rpc/base.ts";
import { SLOW_DAEMON_MS } from "../mcp/host/guest.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { incusOptions } from "./incus_remote.ts";
import { repairCa } from "./instance_checks.ts";

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function logLine(line: string): void {
  // deno-lint-ignore no-console
  console.error(`${new Date().toISOString()} ${line}`);
}

/** The keeper's world, wired to this host. */
export function poolDeps(ctx: CliContext): PoolDeps & { close(): void } {
  const { configDir, home } = ctx.perm;
  const client = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  const health = async (): Promise<ProxyHealth | undefined> => {
    const r = await readProxyHealth(proxyHealthUrl(readHostConfig(configDir, home)));
    return r.kind === "ok" ? r.health : undefined;
  };
  return {
    incus: client,
    readConfig: () => readMcpConfig(configDir),
    definitions: () =>
      loadDefinitions({
        configDir,
        searchPaths: readHostConfig(configDir, home).searchPaths,
        home,
        protectedPaths: [ctx.perm.stateDir, ctx.perm.isbStateDir],
      }),
    async proxyPlace() {
      const p = await loadProxyConfig(`${configDir}/config.yaml`);
      return {
        bridge: p.bridge,
        proxyOnlyBridge: p.proxy_only_bridge,
        subnets: p.proxy_only_subnets,
        ports: { tls: p.ports.tls, forward: p.ports.forward },
      };
    },
    servedCa: async () => (await health())?.caFingerprint,
    async repairCa(name, trusted) {
      await repairCa(ctx, client, name, await health(), trusted);
    },
    memory() {
      try {
        const m = Deno.systemMemoryInfo();
        return { available: m.available, total: m.total };
      } catch {
        return undefined;
      }
    },
    now: () => Date.now(),
    log: logLine,
    close: () => client.close(),
  };
}

function lockDir(ctx: CliContext): string {
  return `${ctx.perm.stateDir}/pool`;
}

async function show(ctx: CliContext, json: boolean): Promise<number> {
  const deps = poolDeps(ctx);
  try {
    const cfg = deps.readConfig();
    const views = poolViews(cfg, (await listMembers(deps)).members);
    const keeper = keeperRunning(lockDir(ctx));
    if (json) {
      out(JSON.stringify({ keeper, pools: views }));
      return 0;
    }
    out(`keeper: ${keeper ? "running" : "not running (pools are not refilled: isx pool keep)"}`);
    if (!views.length) out("no warm pools (warm-pool: in mcp.yaml)");
    for (const v of views) {
      out(
        `${v.template}: ${v.ready.length} of ${v.want} ready, ${v.filling.length} filling, ${v.stale.length} stale`,
      );
      for (const n of v.ready) out(`  ready    ${n}`);
      for (const n of v.filling) out(`  filling  ${n}`);
      for (const s of v.stale) out(`  stale    ${s.name} (${s.why})`);
    }
    return 0;
  } finally {
    deps.close();
  }
}

/** Fills every pool once, as the keeper would (needs the lock: not while a keeper runs). */
async function fill(ctx: CliContext): Promise<number> {
  const lock = takeKeeperLock(lockDir(ctx));
  if ("heldBy" in lock) {
    out(`isx pool: the keeper (pid ${lock.heldBy}) keeps the pools filled; nothing to do`);
    return 0;
  }
  const deps = poolDeps(ctx);
  try {
    for (const n of await cleanLeftovers(deps)) out(`removed ${n} (left by a stopped keeper)`);
    for (;;) {
      const r = await keepPass(deps);
      for (const n of r.retired) out(`retired ${n}`);
      for (const n of r.filled) out(`filled ${n}`);
      if (r.held) out(`isx pool: not filled further: ${r.held}`);
      if (!r.filled.length || r.held) return 0;
    }
  } finally {
    deps.close();
    lock.release();
  }
}

async function drain(ctx: CliContext, template: string | undefined): Promise<number> {
  const deps = poolDeps(ctx);
  try {
    const gone = await drainPools(deps, template);
    out(`isx pool: removed ${gone.length} member(s)${gone.length ? ": " + gone.join(", ") : ""}`);
    if (keeperRunning(lockDir(ctx))) {
      out("  the keeper refills what warm-pool: asks for (set a count to 0 to keep it empty)");
    }
    return 0;
  } finally {
    deps.close();
  }
}

/** Runs the keeper until SIGTERM or SIGINT (a fill in progress ends first). */
async function keep(ctx: CliContext, intervalMs: number): Promise<number> {
  const lock = takeKeeperLock(lockDir(ctx));
  if ("heldBy" in lock) {
    throw new IsbError(
      "already_exists",
      `isx pool keep: a keeper already runs (pid ${lock.heldBy})`,
    );
  }
  const deps = poolDeps(ctx);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const sig of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(sig, onSignal);
  let wake: (() => void) | undefined;
  stop.signal.addEventListener("abort", () => wake?.());
  try {
    logLine(`pool: keeper started (pid ${Deno.pid})`);
    for (const n of await cleanLeftovers(deps)) {
      logLine(`pool: removed ${n} (left by a dead keeper)`);
    }
    let lastHeld = "";
    while (!stop.signal.aborted) {
      let again = false;
      try {
        // one fill per pass, so a config edit or a claim is seen between fills
        const r = await keepPass(deps, { maxFills: 1 });
        for (const n of r.retired) logLine(`pool: retired ${n}`);
        for (const n of r.filled) logLine(`pool: filled ${n}`);
        if ((r.held ?? "") !== lastHeld && r.held) logLine(`pool: holding back: ${r.held}`);
        lastHeld = r.held ?? "";
        again = r.filled.length > 0;
      } catch (e) {
        logLine(`pool: pass failed: ${(e as Error).message}`);
      }
      if (!again && !stop.signal.aborted) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, intervalMs);
        });
      }
    }
    logLine("pool: keeper stopped");
    return 0;
  } finally {
    for (const sig of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(sig, onSignal);
    deps.close();
    lock.release();
  }
}

/** `isx pool`. */
export const poolCommand: Command = {
  name: "pool",
  progs: ["isx"],
  summary: "warm pools of started instances that create_instance claims (show, keep, fill, drain)",
  help: `Usage: isx pool [show] [--json]
       isx pool keep [--interval-ms N]
       isx pool fill
       isx pool drain [TEMPLATE]

Warm pools keep started, unclaimed copies of templates ("members") so that isx mcp's
create_instance (and delegate with a template) claims one in one Incus update instead of
copying and booting. The sizes come from warm-pool: in mcp.yaml (or the mcp: block of
config.yaml), e.g. warm-pool: {tpl-minimal: 2}; default none. A member is an isx branch
copy (pinned NIC, static address, CA trusted, started) with no session, no instance
secret and no credentials: the proxy answers it 403 until a session claims it.

  show    each template's pool: ready, filling and stale members, and whether a keeper
          runs (the default)
  keep    the keeper: keeps every pool filled until SIGTERM; one at a time (a lock in
          the state directory); isx proxy install starts it at boot beside the proxy.
          Fills wait while less than max(2 GiB, 20% of memory) is available.
  fill    fill every pool once, as the keeper would (nothing to do while one runs)
  drain   remove every ready member (of TEMPLATE only, if given); a running keeper
          refills what warm-pool: still asks for

Stale members (template rebuilt, another proxy CA, the proxy's bridge or the template's
network or limits changed) are never handed out: a claim retires them, as the keeper does.

Options:
  --json          show: print one JSON document
  --interval-ms N keep: time between passes when nothing is to do (default 2000)`,
  mode: () => "pool",
  run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      json: { type: "boolean" },
      "interval-ms": { type: "string" },
    });
    const [sub = "show", ...more] = positionals;
    if (sub === "show" && !more.length) return show(ctx, values.json === true);
    if (sub === "fill" && !more.length) return fill(ctx);
    if (sub === "drain" && more.length <= 1) return drain(ctx, more[0]);
    if (sub === "keep" && !more.length) {
      const ms = Number(values["interval-ms"] ?? 2000);
      if (!Number.isInteger(ms) || ms < 100) throw new UsageError("--interval-ms must be ≥ 100");
      return keep(ctx, ms);
    }
    throw new UsageError(`unknown use "${positionals.join(" ")}"`);
  },
};
