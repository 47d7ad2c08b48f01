/**
 * What one line on `isx mcp`'s stdin is, and which MCP era a request speaks. Pure.
 *
 * Two eras share the one stdio channel (docs/mcp.md): a handshake client (2024-11-05 …
 * 2025-11-25) sends `initialize` first and its capabilities hold for the connection; a
 * modern client (2026-07-28) never does, and every request names its protocol version and
 * capabilities in `params._meta`. Capabilities are read from the request that carries them
 * and never carried over to a later one, so a modern request is judged by its own `_meta`.
 *
 * @module
 */

import { VERSION } from "../../rpc/version.ts";

/** Handshake-era versions, newest first: a requested one is echoed, anything else gets the first. */
export const HANDSHAKE_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const;

/** Versions that carry everything per request (no `initialize`). */
export const MODERN_VERSIONS = ["2026-07-28"] as const;

/** The `_meta` keys of the stateless revision. */
export const META = {
  protocolVersion: "io.modelcontextprotocol/protocolVersion",
  clientCapabilities: "io.modelcontextprotocol/clientCapabilities",
  clientInfo: "io.modelcontextprotocol/clientInfo",
  serverInfo: "io.modelcontextprotocol/serverInfo",
  subscriptionId: "io.modelcontextprotocol/subscriptionId",
  relatedTask: "io.modelcontextprotocol/related-task",
  error: "dev.incusspawn/error",
} as const;

/** The notification a task change travels as, in both eras. */
export const TASK_CHANGED = "notifications/isx/task_changed";

/** The experimental capability a handshake client lists to get {@link TASK_CHANGED}. */
export const TASK_CHANGED_CAP = "isx/task_changed";

/** The 2026-07-28 tasks extension. */
export const TASKS_EXT = "io.modelcontextprotocol/tasks";

/** The subscription filter key a modern client sets to get {@link TASK_CHANGED}. */
export const TASK_FILTER_KEY = "dev.incusspawn/taskChanged";

/** Who answers. */
export const SERVER_INFO = { name: "isx", version: VERSION };

/** The server's capabilities, the same in both eras. */
export function capabilities(): Record<string, unknown> {
  return {
    tools: { listChanged: false },
    prompts: { listChanged: false },
    experimental: { [TASK_CHANGED_CAP]: {} },
    tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    extensions: { [TASKS_EXT]: {} },
  };
}

/** JSON-RPC error codes the server uses. */
export const RPC = {
  parse: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  unsupportedVersion: -32022,
} as const;

/** A request id. */
export type Id = string | number;

/** One classified input line. */
export type Incoming =
  | { kind: "request"; id: Id; method: string; params: Record<string, unknown> }
  | { kind: "notification"; method: string; params: Record<string, unknown> }
  | { kind: "response" }
  | { kind: "fault"; id: Id | null; code: number; message: string };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Classifies one line; never throws. */
export function classify(line: string): Incoming {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return { kind: "fault", id: null, code: RPC.parse, message: "parse error: not JSON" };
  }
  if (Array.isArray(v)) {
    return {
      kind: "fault",
      id: null,
      code: RPC.invalidRequest,
      message: "invalid request: batches are not supported; send one message per line",
    };
  }
  if (!isObject(v)) {
    return { kind: "fault", id: null, code: RPC.invalidRequest, message: "invalid request" };
  }
  const id = typeof v.id === "string" || typeof v.id === "number" ? v.id : undefined;
  if (v.jsonrpc !== "2.0") {
    return {
      kind: "fault",
      id: id ?? null,
      code: RPC.invalidRequest,
      message: 'invalid request: "jsonrpc" must be "2.0"',
    };
  }
  if (typeof v.method !== "string") {
    if ("result" in v || "error" in v) return { kind: "response" };
    return { kind: "fault", id: id ?? null, code: RPC.invalidRequest, message: "invalid request" };
  }
  if (v.params !== undefined && !isObject(v.params)) {
    return {
      kind: "fault",
      id: id ?? null,
      code: RPC.invalidParams,
      message: 'invalid params: "params" must be an object',
    };
  }
  const params = (v.params ?? {}) as Record<string, unknown>;
  if ("id" in v && v.id !== undefined) {
    if (id === undefined) {
      return {
        kind: "fault",
        id: null,
        code: RPC.invalidRequest,
        message: 'invalid request: "id" must be a string or a number',
      };
    }
    return { kind: "request", id, method: v.method, params };
  }
  return { kind: "notification", method: v.method, params };
}

/** The request's `_meta`, or an empty object. */
export function metaOf(params: Record<string, unknown>): Record<string, unknown> {
  return isObject(params._meta) ? params._meta : {};
}

/** The modern protocol version a request names, if it names one. */
export function requestVersion(params: Record<string, unknown>): string | undefined {
  const v = metaOf(params)[META.protocolVersion];
  return typeof v === "string" ? v : undefined;
}

/** The version `initialize` answers for a requested one. */
export function negotiate(requested: unknown): string {
  return typeof requested === "string" &&
      (HANDSHAKE_VERSIONS as readonly string[]).includes(requested)
    ? requested
    : HANDSHAKE_VERSIONS[0];
}

/** A progress token, if the request carries one. */
export function progressToken(params: Record<string, unknown>): Id | undefined {
  const t = metaOf(params).progressToken;
  return typeof t === "string" || typeof t === "number" ? t : undefined;
}

/** The modern client capabilities named in this request's own `_meta` (never an earlier one's). */
export function requestCapabilities(params: Record<string, unknown>): Record<string, unknown> {
  const c = metaOf(params)[META.clientCapabilities];
  return isObject(c) ? c : {};
}

/** Whether capabilities (handshake or per request) list `isx/task_changed` under experimental. */
export function wantsTaskChanges(caps: Record<string, unknown>): boolean {
  const exp = caps.experimental;
  return isObject(exp) && TASK_CHANGED_CAP in exp;
}

/** The task filter of a `subscriptions/listen` request, if it asks for task changes. */
export interface TaskFilter {
  /** Only these instances (absent: any). */
  instances?: string[];
  /** Only these task ids (absent: any). */
  taskIds?: string[];
}

function strings(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? v as string[] : undefined;
}

/** Reads the task filter of a listen request: `true`, `{}` or `{instances?, taskIds?}`. */
export function taskFilter(notifications: unknown): TaskFilter | undefined {
  if (!isObject(notifications)) return undefined;
  const f = notifications[TASK_FILTER_KEY];
  if (f === true) return {};
  if (!isObject(f)) return undefined;
  const instances = strings(f.instances);
  const taskIds = strings(f.taskIds);
  return { ...(instances ? { instances } : {}), ...(taskIds ? { taskIds } : {}) };
}

/** Whether a change passes a filter. */
export function filterPasses(f: TaskFilter, change: { instance: string; task_id: string }) {
  return (!f.instances || f.instances.includes(change.instance)) &&
    (!f.taskIds || f.taskIds.includes(change.task_id));
}
