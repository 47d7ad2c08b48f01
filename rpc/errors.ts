/**
 * The one error type of the library: {@link IsbError} with a stable {@link IsbCode}.
 *
 * Codes are the contract of `isb rpc` (shared/spec/isb-rpc.md §3): clients switch on them,
 * so they never change. Each edge (rpc dispatch, MCP refusals, CLI exit codes) maps them
 * exactly once.
 *
 * @module
 */

/** Every stable error code, in the order of the spec's table. */
export const ISB_CODES = [
  "connect",
  "request_timeout",
  "api",
  "not_found",
  "already_exists",
  "operation_timeout",
  "operation_failed",
  "not_ready",
  "exec_timeout",
  "invalid",
  "interpolation",
  "parse",
  "forbidden",
  "websocket",
  "protocol",
  "io",
  "json",
  "bad_request",
] as const;

/** A stable error code. */
export type IsbCode = typeof ISB_CODES[number];

/** Structured details that travel with some codes (see the spec's `data` column). */
export type IsbData = Record<string, unknown>;

/** An error with a stable code, optional structured data and a cause. */
export class IsbError extends Error {
  /** The stable code clients branch on (isb-rpc.md §3); also picks the CLI exit status. */
  readonly code: IsbCode;
  /** Structured details for the reply's `data` field, if the code carries any. */
  readonly data: IsbData | undefined;

  /** Makes an error answered as `code`; `options.cause` keeps the underlying failure. */
  constructor(code: IsbCode, message: string, options: { data?: IsbData; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "IsbError";
    this.code = code;
    this.data = options.data;
  }
}

/** True when `e` is an {@link IsbError} with one of `codes`. */
export function hasCode(e: unknown, ...codes: IsbCode[]): e is IsbError {
  return e instanceof IsbError && codes.includes(e.code);
}

/** True for a missing thing (incus 404 or isb's own "not found"). */
export function isNotFound(e: unknown): e is IsbError {
  return hasCode(e, "not_found");
}

/** The `value` of a lookup, or `undefined` when it answers `not_found`; other errors pass. */
export async function valueIfFound<T>(f: () => Promise<{ value: T }>): Promise<T | undefined> {
  try {
    return (await f()).value;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** True for a conflict (incus 409 or "already exists"). */
export function isConflict(e: unknown): e is IsbError {
  return hasCode(e, "already_exists");
}

/** True for any of the three timeouts. */
export function isTimeout(e: unknown): e is IsbError {
  return hasCode(e, "request_timeout", "operation_timeout", "exec_timeout");
}

/** Shorthand for `new IsbError("invalid", message)`. */
export function invalid(message: string): IsbError {
  return new IsbError("invalid", message);
}

/** Wraps anything thrown into an {@link IsbError}, keeping an existing one as is. */
export function toIsbError(e: unknown, code: IsbCode = "io"): IsbError {
  if (e instanceof IsbError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new IsbError(code, message, { cause: e });
}
