/**
 * The ops port (18080): `GET /health`, `GET /activity`, `GET /accounts` (account names,
 * kinds and defaults, never values: `isx proxy account list` resolves pins with it) and
 * `GET /ca.crt` (the CA the proxy signs with, which the CLI writes into guests whose trust
 * store is out of date), for host
 * callers only (shared/spec/isx-mcp.md §7.D, §7.H). A host caller is one on loopback or on
 * one of the proxy's own addresses (the bridge gateway, which no instance can hold);
 * everyone else, instances included, gets 404, so an agent cannot read other instances'
 * counts. `POST /shutdown` (how `isx proxy stop` ends a background proxy without needing the
 * right to signal processes) and `GET /dump` (the effective config, secrets as lengths only)
 * also need the token the proxy wrote to its 0600 state directory.
 *
 * `/health` is computed on each read: whether the config files changed since start, whether
 * the bridge DNS points at the proxy, what is wrong with the credentials file now.
 *
 * Behind the same host-caller fence: the dashboard (`/dashboard/…`, proxy/dashboard/server.ts,
 * with its own `Host` and token checks) and `POST /tasks`, where `isx mcp` reports the task
 * states it learns (the task-report token in `x-isx-task-token`; proxy/dashboard/tasks.ts).
 *
 * @module
 */

import type { CallerLookup } from "../callers/clients.ts";
import { encodeActivity } from "../activity/activity.ts";
import type { ActivityCounter } from "../activity/counter.ts";
import { normalizeAddress } from "../callers/clients.ts";
import { isLoopback } from "../relay/upstream.ts";
import { constantTimeEqual } from "../config/secret.ts";
import type { PendingNeed } from "./_converge.ts";
import { parseTaskReport, type TaskBoard } from "../dashboard/tasks.ts";
import type { ReloadState } from "../config/reload.ts";
import type { SourceStatus } from "../config/command_source.ts";

/** The credentials in force: their live reload and each command source (never a value). */
export interface CredentialsHealth extends ReloadState {
  /** Credential generations held (1 until the first reload). */
  generation: number;
  /** Each command-sourced credential's state. */
  sources: SourceStatus[];
}

/** The header carrying the shutdown token. */
export const SHUTDOWN_HEADER = "x-isx-proxy-token";
/** The header carrying the task-report token (`POST /tasks`). */
export const TASK_TOKEN_HEADER = "x-isx-task-token";

/** The `/health` body. */
export interface HealthInfo {
  /** Program version. */
  version: string;
  /** Build commit, when known. */
  gitSha: string | null;
  /** Runtime and its version. */
  runtime: string;
  /** Process id. */
  pid: number;
  /** Fingerprint of the CA guests must trust. */
  caFingerprint: string;
  /** Whether the bridge DNS points at the proxy (read from the bridge now). */
  dnsConfigured: boolean;
  /** Whether the proxy manages the bridge DNS at all (`proxy.dns`). */
  dnsManaged: boolean;
  /** Whether a part of config.yaml that needs a restart (or the CA) changed since start. */
  configDrifted: boolean;
  /** The config files that changed since start in a way only a restart applies. */
  configDriftedFiles: string[];
  /** The credentials in force: live reload state and command sources. */
  credentials: CredentialsHealth;
  /** What is wrong with the credentials file as it is now, if anything (never a value). */
  authError: string | null;
  /** Credential namespaces with no account (their placeholders go upstream unchanged). */
  missingCredentials: string[];
  /** Where the running program lives (a restart from elsewhere runs another build). */
  programDir: string | null;
  /**
   * What the proxy needs that does not hold yet (the bridge DNS, the nft tables, a first
   * listing of the instances), each retried with backoff: `isx proxy status` is `running`
   * only when this is empty.
   */
  converging: PendingNeed[];
  /** Start time (epoch ms). */
  startedAt: number;
  /** Where to listen. */
  listen: Record<string, string>;
}

/** The `/health` fields computed on each read (the rest is fixed at start). */
export type HealthStatus = Pick<
  HealthInfo,
  | "gitSha"
  | "dnsConfigured"
  | "dnsManaged"
  | "configDrifted"
  | "configDriftedFiles"
  | "authError"
  | "missingCredentials"
  | "programDir"
  | "converging"
>;

/** What the ops handler needs. */
export interface HealthDeps {
  clients: CallerLookup;
  counter: ActivityCounter;
  health: () => Promise<HealthInfo>;
  /** The CA certificate (PEM) the proxy signs leaves with. */
  caPem: string;
  /** `GET /dump` with the shutdown token: the effective config (secrets as lengths). */
  dump?: () => unknown;
  /** `GET /accounts`: account names, kinds and defaults per namespace (never values). */
  accounts?: () => unknown;
  /** Addresses that are the host itself (the proxy's listen addresses). */
  hostAddresses: ReadonlySet<string>;
  /** `POST /shutdown` with this token calls `onShutdown`; absent = no such endpoint. */
  shutdown?: { token: string; onShutdown: () => void };
  /** Answers every path under `/dashboard` (proxy/dashboard/server.ts). */
  dashboard?: (req: Request) => Promise<Response>;
  /** `POST /tasks` with this token reports a task to the board. */
  taskReport?: { token: string; board: TaskBoard; now: () => number };
}

function json(body: string): Response {
  return new Response(body, {
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

/** True when a connection comes from the host, not an instance. */
export function isHostCaller(address: string, hostAddresses: ReadonlySet<string>): boolean {
  const a = normalizeAddress(address);
  return isLoopback(a) || hostAddresses.has(a);
}

/** The ops handler. */
export function healthHandler(
  deps: HealthDeps,
): (req: Request, info: Deno.ServeHandlerInfo<Deno.NetAddr>) => Promise<Response> {
  return async (req, info) => {
    const path = new URL(req.url).pathname;
    if (!isHostCaller(info.remoteAddr.hostname, deps.hostAddresses)) {
      return new Response("not found\n", { status: 404 });
    }
    if (req.method === "POST" && path === "/shutdown" && deps.shutdown) {
      const token = req.headers.get(SHUTDOWN_HEADER) ?? "";
      if (!constantTimeEqual(token, deps.shutdown.token)) {
        return new Response("forbidden\n", { status: 403 });
      }
      queueMicrotask(deps.shutdown.onShutdown);
      return json(JSON.stringify({ stopping: true, pid: Deno.pid }));
    }
    if (deps.dashboard && (path === "/dashboard" || path.startsWith("/dashboard/"))) {
      return deps.dashboard(req);
    }
    if (req.method === "POST" && path === "/tasks" && deps.taskReport) {
      return taskReport(req, deps.taskReport);
    }
    if (req.method !== "GET") return new Response("not found\n", { status: 404 });
    if (path === "/health") return json(JSON.stringify(await deps.health()));
    if (path === "/ca.crt") {
      return new Response(deps.caPem, {
        headers: { "content-type": "application/x-pem-file", "cache-control": "no-store" },
      });
    }
    if (path === "/dump" && deps.dump && deps.shutdown) {
      const token = req.headers.get(SHUTDOWN_HEADER) ?? "";
      if (!constantTimeEqual(token, deps.shutdown.token)) {
        return new Response("forbidden\n", { status: 403 });
      }
      return json(JSON.stringify(deps.dump(), null, 2));
    }
    if (path === "/activity") {
      return json(encodeActivity(deps.counter.snapshot(deps.clients.known())));
    }
    if (path === "/accounts" && deps.accounts) return json(JSON.stringify(deps.accounts()));
    return new Response("not found\n", { status: 404 });
  };
}

async function taskReport(
  req: Request,
  to: NonNullable<HealthDeps["taskReport"]>,
): Promise<Response> {
  if (!constantTimeEqual(req.headers.get(TASK_TOKEN_HEADER) ?? "", to.token)) {
    return new Response("forbidden\n", { status: 403 });
  }
  const body = await req.text();
  if (body.length > 16_384) return new Response("report too large\n", { status: 413 });
  try {
    const taken = to.board.report(parseTaskReport(JSON.parse(body)), to.now());
    return json(JSON.stringify({ taken }));
  } catch (e) {
    return new Response(`invalid task report: ${(e as Error).message}\n`, { status: 400 });
  }
}
