/**
 * Waiting for Incus background operations. `wait` long-polls `/1.0/operations/<id>/wait`
 * in slices of at most 30 s (so every exchange keeps its own deadline), and when the
 * caller's deadline passes it cancels the operation if Incus allows and throws
 * `operation_timeout` naming the step that stalled (isb `mutate`). A failed operation is
 * `operation_failed` "<step> failed: <message>".
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { formatDuration } from "../duration.ts";
import { type IncusConn, seg } from "./conn.ts";
import type { AsyncReply } from "./envelope.ts";
import type { Operation } from "./types.ts";

/** Options of {@link waitOperation}. */
export interface WaitOptions {
  /** What the operation does, for messages: "create instance web". */
  step: string;
  /** How long to wait in total; the client's `operationMs` when absent. */
  deadlineMs?: number;
}

/** The operation id of an operation path, reply or id. */
export function operationId(op: string | AsyncReply | Operation): string {
  if (typeof op !== "string") {
    return op.kind === "async"
      ? operationId((op as AsyncReply).operation)
      : String((op as Operation).id);
  }
  const path = op.split("?", 1)[0] ?? op;
  return path.slice(path.lastIndexOf("/") + 1);
}

/** Fetches an operation. */
export async function getOperation(conn: IncusConn, id: string): Promise<Operation> {
  return (await conn.sync<Operation>("GET", `/1.0/operations/${seg(id)}`)).metadata;
}

/** Cancels an operation (DELETE); true when incusd accepted it. */
export async function cancelOperation(conn: IncusConn, id: string): Promise<boolean> {
  try {
    await conn.call("DELETE", `/1.0/operations/${seg(id)}`);
    return true;
  } catch {
    return false;
  }
}

/** Waits until the operation ends; returns it on success, throws on failure or deadline. */
export async function waitOperation(
  conn: IncusConn,
  op: string | AsyncReply,
  opts: WaitOptions,
): Promise<Operation> {
  const id = operationId(op);
  const total = opts.deadlineMs ?? conn.timeouts.operationMs;
  const start = Date.now();
  let last: Operation | undefined = typeof op === "string" ? undefined : op.metadata;
  while (true) {
    if (last && last.status_code >= 200) return finished(last, opts.step);
    const left = total - (Date.now() - start);
    if (left <= 0) break;
    const slice = Math.min(30, Math.max(1, Math.ceil(left / 1000)));
    last = await waitSlice(conn, id, slice, Math.min(slice * 1000, left), opts.step);
  }
  const cancelled = last?.may_cancel === true && await cancelOperation(conn, id);
  const waited = Date.now() - start;
  const how = cancelled ? "cancelled" : "not cancellable; left running on the server";
  throw new IsbError(
    "operation_timeout",
    `${opts.step} stalled: operation ${id} still ${last?.status ?? "running"} after ${
      formatDuration(waited)
    } (${how})`,
    { data: { step: opts.step, operation: id, cancelled, waited_secs: waited / 1000 } },
  );
}

/** One long-poll; incusd answers a failed (or still running) operation's wait with an error. */
async function waitSlice(
  conn: IncusConn,
  id: string,
  slice: number,
  ms: number,
  step: string,
): Promise<Operation> {
  const path = `/1.0/operations/${seg(id)}`;
  try {
    const q = { query: { timeout: slice }, timeoutMs: ms + conn.timeouts.requestMs };
    return (await conn.sync<Operation>("GET", `${path}/wait`, q)).metadata;
  } catch (e) {
    if (!(e instanceof IsbError) || e.code !== "api") throw e;
    // incusd 6.0 answers a wait that ran out with HTTP 500 "context deadline exceeded"
    const op = await getOperation(conn, id).catch(() => undefined);
    if (op) return op;
    const why = /^incusd: \S+ \S+: (.*) \(HTTP \d+\)$/s.exec(e.message)?.[1] ?? e.message;
    throw new IsbError("operation_failed", `${step} failed: ${why}`, { data: { step }, cause: e });
  }
}

function finished(op: Operation, step: string): Operation {
  if (op.status_code === 200) return op;
  const why = op.err || op.status || `status ${op.status_code}`;
  throw new IsbError("operation_failed", `${step} failed: ${why}`, { data: { step } });
}
