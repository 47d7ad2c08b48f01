/**
 * MCP Tasks (the 2025-11-25 experimental tasks utility; the same methods as the
 * `io.modelcontextprotocol/tasks` extension's polling core): a task-augmented `tools/call`
 * of a tool with `execution.taskSupport` answers at once with a task handle, runs on, and
 * `tasks/get|result|list|cancel` follow it. The call itself is the ordinary tool call, so the
 * result a task delivers is exactly the result the plain call would have returned.
 *
 * @module
 */

import type { Session } from "../session/mod.ts";
import { callTool, ProtocolFault } from "../tools/mod.ts";
import { randomTag } from "../session/mod.ts";

type Status = "working" | "completed" | "failed" | "cancelled";

interface Entry {
  taskId: string;
  status: Status;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number;
  ctrl: AbortController;
  result?: Record<string, unknown>;
  done: Promise<void>;
  statusMessage?: string;
}

const POLL_MS = 1000;

/** The server's MCP tasks. */
export class McpTasks {
  #s: Session;
  #tasks = new Map<string, Entry>();

  /** Tasks of `session`. */
  constructor(session: Session) {
    this.#s = session;
  }

  #wire(e: Entry): Record<string, unknown> {
    return {
      taskId: e.taskId,
      status: e.status,
      createdAt: e.createdAt,
      lastUpdatedAt: e.lastUpdatedAt,
      ttl: e.ttl,
      pollInterval: POLL_MS,
      ...(e.statusMessage ? { statusMessage: e.statusMessage } : {}),
    };
  }

  /** Starts a task-augmented tools/call; returns the task handle. */
  start(params: Record<string, unknown>, _modern: boolean): Record<string, unknown> {
    const now = new Date(this.#s.deps.now()).toISOString();
    const ttlAsked = (params.task as { ttl?: unknown }).ttl;
    const e: Entry = {
      taskId: `mcp-${randomTag(10)}`,
      status: "working",
      createdAt: now,
      lastUpdatedAt: now,
      ttl: typeof ttlAsked === "number" && ttlAsked > 0 ? ttlAsked : 3_600_000,
      ctrl: new AbortController(),
      done: Promise.resolve(),
    };
    const ctx = { session: this.#s, signal: e.ctrl.signal, progress: () => {} };
    e.done = callTool(params.name, params.arguments, ctx).then((r) => {
      if (e.status === "cancelled") return;
      e.result = r;
      e.status = r.isError ? "failed" : "completed";
    }, (err) => {
      if (e.status === "cancelled") return;
      e.status = "failed";
      e.statusMessage = err instanceof Error ? err.message : String(err);
    }).finally(() => {
      e.lastUpdatedAt = new Date(this.#s.deps.now()).toISOString();
    });
    this.#tasks.set(e.taskId, e);
    return this.#wire(e);
  }

  #get(params: Record<string, unknown>): Entry {
    const id = params.taskId;
    const e = typeof id === "string" ? this.#tasks.get(id) : undefined;
    if (!e) throw new ProtocolFault(-32602, `unknown task: ${JSON.stringify(id)}`);
    return e;
  }

  /** Answers tasks/get, tasks/result, tasks/list, tasks/cancel. */
  async handle(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    switch (method) {
      case "tasks/get":
        return this.#wire(this.#get(params));
      case "tasks/list":
        return { tasks: [...this.#tasks.values()].map((e) => this.#wire(e)) };
      case "tasks/cancel": {
        const e = this.#get(params);
        if (e.status !== "working") {
          throw new ProtocolFault(-32602, `task ${e.taskId} is already ${e.status}`);
        }
        e.status = "cancelled";
        e.lastUpdatedAt = new Date(this.#s.deps.now()).toISOString();
        e.ctrl.abort(new Error("cancelled with tasks/cancel"));
        return this.#wire(e);
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
