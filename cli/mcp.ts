/**
 * `isx mcp`: the MCP server over stdio, for host agents (Claude Code, opencode, any MCP
 * client) and programs. Wires the session to this host (Incus socket, config, proxy health
 * port, audit log) and hands stdin/stdout to the protocol layer; SIGTERM ends the session as
 * end of input does (calls cancelled, instances released, never destroyed).
 *
 * @module
 */

import { type ProxyHealth, readHostConfig, SLOW_DAEMON_MS } from "../mcp/host/mod.ts";
import { serveMcp } from "../mcp/server/mod.ts";
import {
  engineTasks,
  fileAuditor,
  mcpOwner,
  newSessionId,
  readMcpConfig,
  Session,
  SessionLocks,
  SWEEP_STOP_WAIT_MS,
  Sweeper,
  sweepOrphans,
} from "../mcp/session/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";
import { loadDefinitions } from "../mcp/templates/load.ts";
import { loadProxyConfig } from "../proxy/config/host_config.ts";
import { createIncusClient, log } from "../rpc/base.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import { checkProxy, repairCa } from "./instance_checks.ts";
import type { Command } from "./command.ts";
import { incusOptions } from "./incus_remote.ts";

/** `isx mcp`. */
export const mcpCommand: Command = {
  name: "mcp",
  progs: ["isx"],
  summary: "serve MCP on stdin/stdout: agents and programs run instances, commands, tasks",
  help: `Usage: isx mcp [--no-preflight]

Serves the Model Context Protocol on stdin/stdout (one JSON-RPC message per line), for an
agent on this host or a program of your own. Both MCP eras are answered: clients that
start with initialize (2024-11-05 … 2025-11-25) and stateless 2026-07-28 clients
(server/discover, per-request _meta).

Register it with Claude Code:   claude mcp add isx -- isx mcp
Other clients:                  {"mcpServers": {"isx": {"command": "isx", "args": ["mcp"]}}}

Agents may use only the templates approved in ~/.config/isx/mcp.yaml (or the mcp: block
of config.yaml), re-read on every call and never written by isx mcp:
  templates: [tpl-dev]       the only templates agents may use
  max-instances: 8           per user, across sessions, orphans included
  max-concurrent-tasks: 8    background commands, per user
  orphan-grace-hours: 24     how long an orphaned instance lives

The process is the session: it holds what it creates. When input ends (or on SIGTERM)
it releases its instances as orphans, which a later session can adopt. Every action is
logged to ~/.local/state/isx/mcp/mcp.log, credentials scrubbed. See docs/mcp.md.

Options:
  --no-preflight   create and start instances even when the proxy cannot serve them (as
                   isx branch --no-preflight; the CA repair still runs when it answers)`,
  mode: () => "mcp",
  async run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      "no-preflight": { type: "boolean" },
    });
    const skip = values["no-preflight"] === true;
    if (positionals.length) throw new UsageError("isx mcp takes no arguments");
    const { configDir, stateDir, home, cwd } = ctx.perm;
    const client = createIncusClient({
      ...incusOptions(ctx),
      project: ctx.global.project ?? "",
      timeouts: { requestMs: SLOW_DAEMON_MS },
    });
    const proxyConfig = () => loadProxyConfig(`${configDir}/config.yaml`);
    const tasks = engineTasks(createTaskEngine({ incus: client }));
    const id = newSessionId(Deno.pid, Date.now());
    // liveness: this process holds a lock on its session file until it dies
    // (mcp/host/session_locks.ts)
    const locks = new SessionLocks(`${stateDir}/mcp/sessions`);
    locks.start(id);
    const session = new Session({
      incus: client,
      tasks,
      // exactly isx branch's checks: the preflight (proxy answers, this build, the template's
      // credentials) and the CA repair after the copy
      checks: {
        preflight: (o) => checkProxy(ctx, { ...o, skip }),
        repairCa: (name, health, trusted) =>
          repairCa(ctx, client, name, health as ProxyHealth | undefined, trusted),
      },
      readConfig: () => readMcpConfig(configDir),
      // never the project-local layer: isx mcp uses only what the user's own layers define
      definitions: () =>
        loadDefinitions({ configDir, searchPaths: readHostConfig(configDir, home).searchPaths }),
      async proxyPlace() {
        const p = await proxyConfig();
        return {
          bridge: p.bridge,
          proxyOnlyBridge: p.proxy_only_bridge,
          subnets: p.proxy_only_subnets,
          ports: { tls: p.ports.tls, forward: p.ports.forward },
        };
      },
      async fetchActivity() {
        const p = await proxyConfig();
        try {
          const res = await fetch(`http://127.0.0.1:${p.ports.health}/activity`, {
            signal: AbortSignal.timeout(3000),
          });
          const text = await res.text();
          return { status: res.status, body: res.ok ? JSON.parse(text) : text };
        } catch {
          return undefined;
        }
      },
      initialized() {
        try {
          return Deno.statSync(`${configDir}/config.yaml`).isFile;
        } catch {
          return false;
        }
      },
      audit: fileAuditor(`${stateDir}/mcp/mcp.log`),
      alive: (other) => locks.alive(other),
      id,
      // the host user, and the state dir whose session locks tell its sessions' liveness
      owner: mcpOwner(Deno.uid() ?? 0, stateDir),
      pid: Deno.pid,
      cwd,
      now: () => Date.now(),
      sleep: (ms, signal) =>
        new Promise<void>((resolve, reject) => {
          if (signal?.aborted) return reject(signal.reason);
          const t = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          }, ms);
          const onAbort = () => {
            clearTimeout(t);
            reject(signal!.reason);
          };
          signal?.addEventListener("abort", onAbort, { once: true });
        }),
    });
    // the orphan sweep: at the session's start, then every 10 minutes while it runs, once
    // isx init has been done
    const sweeper = new Sweeper((guard) =>
      session.deps.initialized() ? sweepOrphans(session, guard) : Promise.resolve()
    );
    const server = serveMcp({
      input: Deno.stdin.readable,
      output: Deno.stdout.writable,
      session,
      startWatcher: () => tasks.watch(session),
      onSessionStart: () => sweeper.start(),
    });
    // a long-lived server must not die of one stray rejection (a guest's exec socket reset
    // while its instance stopped, seen in tests): it is logged, the session goes on
    const onRejection = (e: PromiseRejectionEvent) => {
      e.preventDefault();
      log.warn("isx mcp: unhandled rejection", { error: String(e.reason) });
    };
    globalThis.addEventListener("unhandledrejection", onRejection);
    const onTerm = () => {
      // a sweep's marked step in flight ends first, so no pending-op mark is left behind
      Promise.all([server.shutdown(), sweeper.stop(SWEEP_STOP_WAIT_MS)]).finally(() => {
        locks.stop();
        Deno.exit(0);
      });
    };
    Deno.addSignalListener("SIGTERM", onTerm);
    try {
      await server.finished;
      await sweeper.stop(SWEEP_STOP_WAIT_MS);
    } finally {
      Deno.removeSignalListener("SIGTERM", onTerm);
      globalThis.removeEventListener("unhandledrejection", onRejection);
      locks.stop();
      client.close();
    }
    return 0;
  },
};
