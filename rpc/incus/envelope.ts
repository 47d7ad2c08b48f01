/**
 * The Incus response envelope, decoded. Every REST answer is `{type: "sync"|"async"|"error",
 * status_code, error_code, error, operation, metadata}`; this module turns one into a
 * {@link Reply} or throws the `IsbError` the spec assigns (`api`, `not_found`,
 * `already_exists`, `protocol`). Pure: no I/O, so it is tested as a table.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import type { Operation } from "./types.ts";

/** A synchronous answer: the metadata and the ETag that guards a later update. */
export interface SyncReply {
  /** Which reply this is. */
  kind: "sync";
  /** The envelope's `metadata`. */
  metadata: unknown;
  /** The `ETag` header, if incusd sent one. */
  etag?: string;
}

/** An asynchronous answer: a background operation to wait for. */
export interface AsyncReply {
  /** Which reply this is. */
  kind: "async";
  /** The operation's URL path, e.g. `/1.0/operations/<uuid>`. */
  operation: string;
  /** The envelope's `metadata`. */
  metadata: Operation;
}

/** A decoded envelope. */
export type Reply = SyncReply | AsyncReply;

/** What the decoder needs to know about the exchange. */
export interface Exchange {
  /** HTTP method. */
  method: string;
  /** Request path with its query string. */
  path: string;
  /** HTTP status code. */
  status: number;
  /** The `ETag` response header, if any. */
  etag?: string | null;
}

/** Decodes one response body (raw text) or throws the mapped `IsbError`. */
export function decodeEnvelope(x: Exchange, text: string): Reply {
  let env: unknown;
  try {
    /** Environment variables. */
    env = JSON.parse(text);
  } catch {
    if (x.status >= 400) throw apiError(x, x.status, text.trim() || `HTTP ${x.status}`);
    throw new IsbError(
      "protocol",
      `incusd: ${x.method} ${x.path}: response is not JSON (HTTP ${x.status}): ${
        JSON.stringify(text.slice(0, 80))
      }`,
      { data: { status: x.status, method: x.method, path: x.path } },
    );
  }
  if (!isRecord(env) || typeof env.type !== "string") {
    if (x.status >= 400) throw apiError(x, x.status, `HTTP ${x.status}`);
    throw badShape(x, "no envelope type");
  }
  if (env.type === "error" || x.status >= 400) {
    const status = typeof env.error_code === "number" && env.error_code >= 400
      ? env.error_code
      : x.status;
    const message = typeof env.error === "string" && env.error ? env.error : `HTTP ${status}`;
    throw apiError(x, status, message);
  }
  if (env.type === "sync") {
    return x.etag ? { kind: "sync", metadata: env.metadata, etag: x.etag } : {
      /** Which reply this is. */
      kind: "sync",
      metadata: env.metadata,
    };
  }
  if (env.type === "async") {
    if (typeof env.operation !== "string" || !isRecord(env.metadata)) {
      throw badShape(x, "async reply without operation");
    }
    return { kind: "async", operation: env.operation, metadata: env.metadata as Operation };
  }
  throw badShape(x, `unknown envelope type ${JSON.stringify(env.type)}`);
}

/** The error for an incusd error answer: `not_found` (404), `already_exists` (409), else `api`. */
export function apiError(x: Exchange, status: number, message: string): IsbError {
  const data = { status, method: x.method, path: x.path };
  const text = `incusd: ${x.method} ${x.path}: ${message} (HTTP ${status})`;
  if (status === 404) return new IsbError("not_found", text, { data });
  if (status === 409 || /already exists/i.test(message)) {
    return new IsbError("already_exists", text, { data });
  }
  return new IsbError("api", text, { data });
}

/** True for the `api` error of a failed If-Match (HTTP 412): re-read and retry. */
export function isPreconditionFailed(e: unknown): e is IsbError {
  return e instanceof IsbError && e.code === "api" && e.data?.status === 412;
}

function badShape(x: Exchange, why: string): IsbError {
  return new IsbError(
    "protocol",
    `incusd: ${x.method} ${x.path}: bad response: ${why} (HTTP ${x.status})`,
    { data: { status: x.status, method: x.method, path: x.path } },
  );
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
