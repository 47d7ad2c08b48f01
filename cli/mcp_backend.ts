/**
 * The heavy half of `isx mcp`: the session wired to this host (Incus client, config, proxy
 * health port, audit log, session locks, the orphan sweeper, the task engine) and the tool
 * table. `cli/mcp.ts` imports it by a computed specifier on the first call that needs it or
 * once the client pauses after the handshake, so `initialize` and `tools/list` are answered
 * before this module, zod, js-yaml and the templates load (issue 11, start-up).
 * `cli/bundle.ts` and `scripts/compile.ts` carry it as they carry the commands.
 *
 * @module
 */

import { type ProxyHealth, readHostConfig, SLOW_DAEMON_MS } from "../mcp/host/mod.ts";
import type { McpBackend } from "../mcp/server/mod.ts";
import {
  engineTasks,
  fileAuditor,
  mcpOwner,
  newSessionId,
  readMcpConfig,
  reholdSession,
  Session,
  SessionLocks,
  SWEEP_STOP_WAIT_MS,
  Sweeper,
  sweepOrphans,
  type TaskFact,
} from "../mcp/session/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";
import { callTool } from "../mcp/tools/mod.ts";
import { loadDefinitions } from "../mcp/templates/load.ts";
import { loadProxyConfig } from "../proxy/config/host_config.ts";
import { createIncusClient, IsbError } from "../rpc/base.ts";
import { after } from "../rpc/timer.ts";
import { coordinatorSession, grantOf } from "../mcp/instances/mod.ts";
import { readStamps } from "../mcp/host/mod.ts";
import { checkProxy, repairCa } from "./instance_checks.ts";
import type { CliContext } from "./command.ts";
import { incusOptions } from "./incus_remote.ts";

/** The backend of one `isx mcp` process, and what ends it. */
export interface McpProcessBackend extends McpBackend {
  /** Stops the orphan sweeper: a marked step in flight ends first (no pending-op mark left). */
  stopSweeper(): Promise<void>;
  /** Releases the session lock and closes the Incus client (after the session released). */
  close(): void;
}

/**
 * The session id of `isx mcp --caller-instance <name>`: the coordinator's grant as Incus
 * holds it now; an instance without one is refused (the proxy checked it too).
 */
async function coordinatorId(client: ReturnType<typeof createIncusClient>, name: string) {
  const grant = grantOf(readStamps((await client.getInstance(name)).value.config));
  if (!grant) {
    throw new IsbError(
      "forbidden",
      `serve coordinator "${name}": it has no mcp-caller grant (isx branch --mcp-client)`,
    );
  }
  return coordinatorSession(name, grant);
}

/**
 * Opens the backend of `isx mcp` (`skip`: `--no-preflight`; `sessionId`: given by cli/mcp.ts;
 * `caller`: the coordinator served, `--caller-instance`, whose session is the instance).
 */
export async function openMcpBackend(
  ctx: CliContext,
  skip: boolean,
  opts: { sessionId?: string; caller?: string } = {},
): Promise<McpProcessBackend> {
  const { sessionId, caller } = opts;
  const { configDir, stateDir, home, cwd } = ctx.perm;
  const client = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  const proxyConfig = () => loadProxyConfig(`${configDir}/config.yaml`);
  const tasks = engineTasks(createTaskEngine({ incus: client }));
  const id = caller
    ? await coordinatorId(client, caller).catch((e) => {
      client.close();
      throw e;
    })
    : sessionId ?? newSessionId(Deno.pid, Date.now());
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
      loadDefinitions({
        configDir,
        searchPaths: readHostConfig(configDir, home).searchPaths,
        home,
        protectedPaths: [ctx.perm.stateDir, ctx.perm.isbStateDir],
      }),
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
    ...(caller ? { keepOnEnd: true } : {}),
    // the host user, and the state dir whose session locks tell its sessions' liveness
    owner: mcpOwner(Deno.uid() ?? 0, stateDir),
    pid: Deno.pid,
    cwd: caller ? `instance:${caller}` : cwd,
    now: () => Date.now(),
    reportTask: taskReporter(stateDir, proxyConfig),
    // the runtime's timer, not Node's (rpc/timer.ts: its first call costs the first answer)
    sleep: (ms, signal) =>
      new Promise<void>((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const disarm = after(ms, () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        });
        const onAbort = () => {
          disarm();
          reject(signal!.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
      }),
  });
  // the orphan sweep: at the session's start (after its first answer), then every 10 minutes while it runs, once
  // isx init has been done
  const sweeper = new Sweeper((guard) =>
    session.deps.initialized() ? sweepOrphans(session, guard) : Promise.resolve()
  );
  // a coordinator holds again what it held, before any tool answers (§10)
  if (caller) {
    await reholdSession(session).catch((e) =>
      session.audit({ tool: "rehold", outcome: `failed: ${(e as Error).message}`, ms: 0 })
    );
  }
  // the first sweep waits for the first call's answer (or a second): it is background work,
  // and beside the first call it put an instance list on that call's answer (sweeper.ts)
  let answered!: () => void;
  const firstAnswer = new Promise<void>((r) => answered = r);
  const firstCallTool: typeof callTool = (...args) => {
    const p = callTool(...args);
    // a macrotask later: the server has written the answer by then
    const done = () => void after(0, answered);
    p.then(done, done);
    return p;
  };
  return {
    session,
    callTool: firstCallTool,
    startWatcher: () => tasks.watch(session),
    onSessionStart: () => sweeper.startAfter(firstAnswer),
    stopSweeper: () => sweeper.stop(SWEEP_STOP_WAIT_MS),
    close() {
      locks.stop();
      client.close();
    },
  };
}

/**
 * Posts each task fact to the proxy's `POST /tasks` (the dashboard's tasks), in order, with
 * the task-report token the proxy wrote (`<stateDir>/proxy/task-report.token`). Best effort:
 * no proxy, no token or a slow answer drops the fact (the dashboard is a view, never a
 * record), and a session never waits for it.
 */
export function taskReporter(
  stateDir: string,
  proxyConfig: () => Promise<{ ports: { health: number } }>,
): (fact: TaskFact) => void {
  let chain = Promise.resolve();
  return (fact) => {
    chain = chain.then(async () => {
      try {
        const token = (await Deno.readTextFile(`${stateDir}/proxy/task-report.token`)).trim();
        const { ports } = await proxyConfig();
        const res = await fetch(`http://127.0.0.1:${ports.health}/tasks`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-isx-task-token": token },
          body: JSON.stringify(fact),
          signal: AbortSignal.timeout(2000),
        });
        await res.body?.cancel();
      } catch { /* no proxy, no token file, or too slow: the view misses this fact */ }
    });
  };
}
