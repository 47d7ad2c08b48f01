/**
 * One `tools/call`, as a plain call or as an MCP task. Apart from the dispatch (mod.ts)
 * because it is the one request with its own life: it waits for the backend, reports
 * progress at most once a second when the client gave a token, and its answer is dropped
 * once the call is cancelled (a cancelled call's answer is never sent). Tool faults become
 * JSON-RPC errors here; anything else is an internal error naming its message.
 *
 * @module
 */

import { catalogSupportsTasks } from "../tools/catalog.ts";
import { ProtocolFault } from "../tools/fault.ts";
import type { Outbox } from "./_outbox.ts";
import type { McpTasks } from "./tasks.ts";
import type { McpBackend } from "./types.ts";
import { type Id, progressToken, requestCapabilities, RPC, TASKS_EXT } from "./wire.ts";

/** What a call needs of the session's dispatch. */
export interface CallDeps {
  /** Where answers go. */
  out: Outbox;
  /** The backend, loaded on first need. */
  need(): Promise<McpBackend>;
  /** The task store (there once {@link CallDeps.need} resolved). */
  tasks(): McpTasks;
  /** Runs a request, cancellable by its id, counted among those in flight. */
  track(id: Id, run: (signal: AbortSignal) => Promise<void>): void;
}

/** Starts `tools/call` request `id`; its answer is sent when it ends. */
export function toolCall(
  d: CallDeps,
  id: Id,
  params: Record<string, unknown>,
  modern: boolean,
): void {
  const { out } = d;
  const token = progressToken(params);
  let last = 0;
  let count = 0;
  // a task when asked (handshake: `task`), or offered (stateless: this request's own
  // capabilities list the tasks extension); only tools with task support
  const asked = modern
    ? typeof requestCapabilities(params).extensions === "object" &&
      TASKS_EXT in (requestCapabilities(params).extensions as object)
    : typeof params.task === "object" && params.task !== null;
  if (asked && catalogSupportsTasks(params.name)) {
    d.track(id, async () => {
      try {
        await d.need();
        await out.reply(id, d.tasks().start(params, modern), modern);
      } catch (e) {
        await out.fail(id, RPC.internal, `internal error: ${(e as Error).message}`);
      }
    });
    return;
  }
  d.track(id, async (signal) => {
    let x: McpBackend;
    try {
      x = await d.need();
    } catch (e) {
      if (!signal.aborted) {
        await out.fail(id, RPC.internal, `internal error: ${(e as Error).message}`);
      }
      return;
    }
    const ctx = {
      session: x.session,
      signal,
      progress(message: string) {
        if (token === undefined || signal.aborted) return;
        const now = x.session.deps.now();
        if (now - last < 1000) return;
        last = now;
        out.send({
          method: "notifications/progress",
          params: { progressToken: token, progress: ++count, message },
        });
      },
    };
    try {
      const result = await x.callTool(params.name, params.arguments, ctx);
      if (!signal.aborted) await out.reply(id, result, modern);
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ProtocolFault) await out.fail(id, e.code, e.message);
      else await out.fail(id, RPC.internal, `internal error: ${(e as Error).message}`);
    }
  });
}
