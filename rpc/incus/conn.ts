/**
 * The connection context every resource module works through: a transport, the project
 * the calls are scoped to, and the default deadlines. It builds URLs (adding `project=` and
 * `target=` so no resource function ever takes a project), runs one exchange and decodes
 * the envelope. `withProject` makes a scoped copy that shares the transport.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { log } from "../log.ts";
import { type AsyncReply, decodeEnvelope, type Reply } from "./envelope.ts";
import type { HttpResponse, HttpTransport } from "./http.ts";

/** Default deadlines (milliseconds), per spec §14. */
export interface Timeouts {
  /** One HTTP exchange (default 30 s). */
  requestMs: number;
  /** Waiting for an instance create / copy operation (default 600 s). */
  createMs: number;
  /** Waiting for any other operation: start, stop, delete… (default 120 s). */
  operationMs: number;
}

/** The spec's defaults. */
export const DEFAULT_TIMEOUTS: Timeouts = {
  requestMs: 30_000,
  createMs: 600_000,
  operationMs: 120_000,
};

/** Options of one REST call. */
export interface CallOptions {
  /** JSON value, or raw bytes sent as is. */
  body?: unknown;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** Extra query parameters; `undefined` values are left out. */
  query?: Record<string, string | number | boolean | undefined>;
  /** Cluster member to run the request on (`?target=`). */
  target?: string;
  /** Deadline of this exchange; the client's `requestMs` when absent. */
  timeoutMs?: number;
}

/** A transport plus project scope and deadlines; what resource functions take first. */
export class IncusConn {
  /** The shared transport. */
  readonly transport: HttpTransport;
  /** The project ("" means the daemon's default, sent as no parameter). */
  readonly project: string;
  /** Default deadlines. */
  readonly timeouts: Timeouts;
  /** Cluster member new instances are placed on ("" = incusd chooses). */
  readonly target: string;

  /** Binds a transport to a project ("default" is sent as no parameter) and deadlines. */
  constructor(transport: HttpTransport, project: string, timeouts: Timeouts, target = "") {
    this.transport = transport;
    this.project = project === "default" ? "" : project;
    this.timeouts = timeouts;
    this.target = target;
  }

  /** A copy scoped to `project` sharing the same transport (and placement target). */
  withProject(project: string): IncusConn {
    return new IncusConn(this.transport, project, this.timeouts, this.target);
  }

  /** `path` plus the query string, with `project` and `target` added. */
  url(path: string, opts: Pick<CallOptions, "query" | "target"> = {}): string {
    const [base = "", existing] = path.split("?", 2) as [string, string | undefined];
    const q = new URLSearchParams(existing);
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v !== undefined) q.set(k, String(v));
    }
    // Incus refuses a project next to `all-projects` (HTTP 400), so a client scoped to a
    // project (`--project`, INCUS_PROJECT) still lists every project when asked to
    if (this.project && !q.has("project") && q.get("all-projects") !== "true") {
      q.set("project", this.project);
    }
    if (opts.target) q.set("target", opts.target);
    const s = q.toString();
    return s ? `${base}?${s}` : base;
  }

  /** One exchange, undecoded (file contents, raw bodies). */
  raw(method: string, path: string, opts: CallOptions = {}): Promise<HttpResponse> {
    return this.transport.request({
      method,
      path: this.url(path, opts),
      timeoutMs: opts.timeoutMs ?? this.timeouts.requestMs,
      ...(opts.body === undefined ? {} : { body: opts.body }),
      ...(opts.headers ? { headers: opts.headers } : {}),
    });
  }

  /** One exchange, decoded as an envelope. */
  async call(method: string, path: string, opts: CallOptions = {}): Promise<Reply> {
    const t = performance.now();
    const res = await this.raw(method, path, opts);
    const text = new TextDecoder().decode(res.body);
    const url = this.url(path, opts);
    // ISX_LOG=debug: every exchange with its time, to see which call a slow step waits on
    // (the path only: bodies can carry file contents and secrets' hashes)
    log.debug("incus", {
      method,
      path: url,
      status: res.status,
      ms: +(performance.now() - t).toFixed(1),
    });
    return decodeEnvelope(
      { method, path: url, status: res.status, etag: res.headers.get("etag") },
      text,
    );
  }

  /** A call that must answer synchronously; returns the metadata and the ETag. */
  async sync<T>(
    method: string,
    path: string,
    opts: CallOptions = {},
  ): Promise<{ metadata: T; etag: string | undefined }> {
    const r = await this.call(method, path, opts);
    if (r.kind !== "sync") throw unexpected(method, path, "an operation", "a sync reply");
    return { metadata: r.metadata as T, etag: r.etag };
  }

  /** A call that must start a background operation. */
  async async(method: string, path: string, opts: CallOptions = {}): Promise<AsyncReply> {
    const r = await this.call(method, path, opts);
    if (r.kind !== "async") throw unexpected(method, path, "a sync reply", "an operation");
    return r;
  }
}

function unexpected(method: string, path: string, got: string, want: string): IsbError {
  return new IsbError("protocol", `incusd: ${method} ${path}: got ${got}, expected ${want}`);
}

/** Percent-encodes one path segment (instance, volume, network names). */
export function seg(name: string): string {
  return encodeURIComponent(name);
}
