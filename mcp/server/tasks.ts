/**
 * MCP Tasks in both eras, over one store: the 2025-11-25 experimental tasks utility (a
 * `tools/call` with `task` answers `{task}`; `tasks/get|result|list|cancel`) and the
 * 2026-07-28 `io.modelcontextprotocol/tasks` extension (a request whose own `_meta`
 * capabilities list the extension may be answered `resultType: "task"` with the task's
 * fields; `tasks/get` carries the final `result` or `error`; `tasks/cancel`). The call itself
 * is the ordinary tool call, so a task delivers exactly the result the plain call returns.
 *
 * @module
 */

import { ProtocolFault } from "../tools/fault.ts";
import type { McpBackend } from "./types.ts";

type Status = "working" | "completed" | "failed" | "cancelled";

interface Entry {
  taskId: string;
  status: Status;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number;
  ctrl: AbortController;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
  done: Promise<void>;
  statusMessage?: string;
}

const POLL_MS = 1000;
const TAG_CHARS = "abcdefghijklmnopqrstuvwxyz234567";

/** A task id's random part (as the session's tags; this module loads before the session). */
function tag(n: number): string {
  return [...crypto.getRandomValues(new Uint8Array(n))].map((b) => TAG_CHARS[b % 32]).join("");
}

/** The server's MCP tasks. */
export class McpTasks {
  #b: McpBackend;
  #tasks = new Map<string, Entry>();

  /** Tasks of the backend's session, run with its tool table. */
  constructor(backend: McpBackend) {
    this.#b = backend;
  }

  #wire(e: Entry, modern: boolean): Record<string, unknown> {
    return {
      taskId: e.taskId,
      status: e.status,
      createdAt: e.createdAt,
      lastUpdatedAt: e.lastUpdatedAt,
      ...(modern
        ? { ttlMs: e.ttl, pollIntervalMs: POLL_MS }
        : { ttl: e.ttl, pollInterval: POLL_MS }),
      ...(e.statusMessage ? { statusMessage: e.statusMessage } : {}),
    };
  }

  /** Starts a tools/call as a task; returns the result that announces it, in the era's shape. */
  start(params: Record<string, unknown>, modern: boolean): Record<string, unknown> {
    const now = new Date(this.#b.session.deps.now()).toISOString();
    const ttlAsked = (params.task as { ttl?: unknown } | undefined)?.ttl;
    const e: Entry = {
      taskId: `mcp-${tag(10)}`,
      status: "working",
      createdAt: now,
      lastUpdatedAt: now,
      ttl: typeof ttlAsked === "number" && ttlAsked > 0 ? ttlAsked : 3_600_000,
      ctrl: new AbortController(),
      done: Promise.resolve(),
    };
    const ctx = { session: this.#b.session, signal: e.ctrl.signal, progress: () => {} };
    e.done = this.#b.callTool(params.name, params.arguments, ctx).then((r) => {
      if (e.status === "cancelled") return;
      e.result = r;
      e.status = "completed"; // a refusal is a completed call whose result says isError
    }, (err) => {
      if (e.status === "cancelled") return;
      e.status = "failed";
      e.statusMessage = err instanceof Error ? err.message : String(err);
      e.error = {
        code: err instanceof ProtocolFault ? err.code : -32603,
        message: e.statusMessage,
      };
    }).finally(() => {
      e.lastUpdatedAt = new Date(this.#b.session.deps.now()).toISOString();
    });
    this.#tasks.set(e.taskId, e);
    return modern ? { resultType: "task", ...this.#wire(e, true) } : { task: this.#wire(e, false) };
  }

  #get(params: Record<string, unknown>): Entry {
    const id = params.taskId;
    const e = typeof id === "string" ? this.#tasks.get(id) : undefined;
    if (!e) throw new ProtocolFault(-32602, `unknown task: ${JSON.stringify(id)}`);
    return e;
  }

  /** Answers tasks/get, tasks/result, tasks/list, tasks/cancel. */
  async handle(
    method: string,
    params: Record<string, unknown>,
    modern: boolean,
  ): Promise<Record<string, unknown>> {
    switch (method) {
      case "tasks/get": {
        const e = this.#get(params);
        if (!modern) return this.#wire(e, false);
        return {
          ...this.#wire(e, true),
          ...(e.status === "completed" && e.result ? { result: e.result } : {}),
          ...(e.status === "failed" && e.error ? { error: e.error } : {}),
        };
      }
      case "tasks/list":
        return { tasks: [...this.#tasks.values()].map((e) => this.#wire(e, modern)) };
      case "tasks/cancel": {
        const e = this.#get(params);
        if (e.status !== "working") {
          throw new ProtocolFault(-32602, `task ${e.taskId} is already ${e.status}`);
        }
        e.status = "cancelled";
        e.lastUpdatedAt = new Date(this.#b.session.deps.now()).toISOString();
        e.ctrl.abort(new Error("cancelled with tasks/cancel"));
        return modern ? {} : this.#wire(e, false);
      }
      default: {
        const e = this.#get(params);
        await e.done;
        if (!e.result) {
          throw new ProtocolFault(-32603, `task ${e.taskId} ended ${e.status} without a result`);
        }
        const meta = { ...(e.result._meta as object ?? {}) };
        return {
          ...e.result,
          _meta: { ...meta, "io.modelcontextprotocol/related-task": { taskId: e.taskId } },
        };
      }
    }
  }

  /** Cancels every working task (end of session). */
  cancelAll(): void {
    for (const e of this.#tasks.values()) {
      if (e.status === "working") e.ctrl.abort(new Error("the session is ending"));
    }
  }
}
