/**
 * The MCP server's refusal vocabulary (shared/spec/isx-mcp.md §1.4) and the one place where
 * the library's {@link IsbCode}s meet it. A tool throws {@link RefusalError} (or lets an
 * `IsbError` escape); the tool wrapper in `tools/mod.ts` turns either into an `isError`
 * result with `_meta["dev.incusspawn/error"]`, never a JSON-RPC error: those are reserved for
 * protocol faults. `REFUSAL_FOR` is a `Record` so the compiler flags a code left unmapped.
 *
 * @module
 */

import type { IsbCode } from "../rpc/base.ts";
import { IsbError } from "../rpc/base.ts";

/** Every refusal code, in the spec's order. */
export const REFUSAL_CODES = [
  "invalid_argument",
  "not_approved",
  "not_found",
  "not_held",
  "wrong_state",
  "busy",
  "limit",
  "unavailable",
  "task_failed",
  "refused",
  "internal",
] as const;

/** A refusal code clients switch on. */
export type RefusalCode = typeof REFUSAL_CODES[number];

/** A tool's refusal: a code and a message that tells the agent what to do. */
export class RefusalError extends Error {
  /** The stable refusal code. */
  readonly code: RefusalCode;

  /** Makes a refusal answered as `code`. */
  constructor(code: RefusalCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RefusalError";
    this.code = code;
  }
}

/** The refusal a library error escaping a tool becomes. */
export const REFUSAL_FOR: Record<IsbCode, RefusalCode> = {
  connect: "unavailable",
  request_timeout: "unavailable",
  api: "unavailable",
  not_found: "not_found",
  already_exists: "refused",
  operation_timeout: "unavailable",
  operation_failed: "unavailable",
  not_ready: "unavailable",
  exec_timeout: "unavailable",
  invalid: "invalid_argument",
  interpolation: "invalid_argument",
  parse: "invalid_argument",
  forbidden: "refused",
  websocket: "unavailable",
  protocol: "unavailable",
  io: "unavailable",
  json: "unavailable",
  bad_request: "invalid_argument",
};

/** Any thrown value as a refusal: ours as is, the library's mapped, anything else `internal`. */
export function toRefusal(e: unknown): RefusalError {
  if (e instanceof RefusalError) return e;
  if (e instanceof IsbError) return new RefusalError(REFUSAL_FOR[e.code], e.message, { cause: e });
  const msg = e instanceof Error ? e.message : String(e);
  return new RefusalError("internal", `internal error (a bug in isx; please report it): ${msg}`, {
    cause: e,
  });
}
