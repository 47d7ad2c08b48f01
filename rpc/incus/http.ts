/**
 * One HTTP/1.1 exchange with incusd, with a deadline. This is the only module of the client
 * that opens connections for REST calls: over the local unix socket (a connection per
 * request, `http_unix.ts`) or over HTTPS with a TLS client certificate for a remote Incus
 * (`fetch` with `Deno.createHttpClient`). It maps OS and transport failures to the stable
 * codes (`connect`, `request_timeout`, `protocol`, `io`) and knows nothing about the envelope.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { WsClient, type WsTarget } from "./websocket.ts";
import { formatDuration } from "../duration.ts";
import { unixExchange } from "./http_unix.ts";
import type { HeaderLookup } from "./response_headers.ts";
import { after } from "../timer.ts";

/** TLS material for a remote Incus (PEM strings). */
export interface TlsIdentity {
  /** Client certificate (PEM). */
  cert: string;
  /** Client private key (PEM). */
  key: string;
  /** CA certificates to trust for the server (PEM); the system roots when absent. */
  caCerts?: string[];
}

/** Where incusd is: a unix socket path, or an `https://host:port` URL with a client identity. */
export type Endpoint =
  | { socket: string }
  | { url: string; tls: TlsIdentity };

/** One request as the transport sees it; `path` already carries its query string. */
export interface HttpRequest {
  /** HTTP method. */
  method: string;
  /** Request path with its query string. */
  path: string;
  /** JSON-encodable value (sent as JSON) or raw bytes (sent as is). */
  body?: unknown;
  /** Extra request headers. */
  headers?: Record<string, string>;
  /** Deadline of this exchange, response body included. */
  timeoutMs: number;
}

/** A complete response: status, headers and the whole body. */
export interface HttpResponse {
  /** HTTP status code. */
  status: number;
  /** Response headers (`Headers` from fetch, `ResponseHeaders` from the unix exchange). */
  headers: HeaderLookup;
  /** The whole response body. */
  body: Uint8Array;
}

/** A reusable HTTP client bound to one endpoint. */
export class HttpTransport {
  #client: Deno.HttpClient | undefined;
  #socket: string | undefined;
  #base: string;
  /** The endpoint's name in messages and `connect` data (socket path or URL). */
  readonly where: string;
  /** The endpoint this transport talks to. */
  readonly endpoint: Endpoint;

  /** Creates the pooled HTTP client for `endpoint`. */
  constructor(endpoint: Endpoint) {
    this.endpoint = endpoint;
    if ("socket" in endpoint) {
      // a connection per request, written to at once (why not fetch: see http_unix.ts)
      this.#socket = endpoint.socket;
      this.#base = "http://incus";
      this.where = endpoint.socket;
    } else {
      this.#client = Deno.createHttpClient({
        cert: endpoint.tls.cert,
        key: endpoint.tls.key,
        ...(endpoint.tls.caCerts ? { caCerts: endpoint.tls.caCerts } : {}),
      });
      this.#base = endpoint.url.replace(/\/+$/, "");
      this.where = this.#base;
    }
  }

  /** Performs one exchange; throws `connect`, `request_timeout`, `protocol` or `io`. */
  async request(req: HttpRequest): Promise<HttpResponse> {
    const ctl = new AbortController();
    let timedOut = false;
    const cancel = after(req.timeoutMs, () => {
      timedOut = true;
      ctl.abort();
    });
    try {
      if (this.#socket !== undefined) {
        const body = req.body === undefined ? undefined : encodeBody(req.body);
        return await unixExchange(this.#socket, {
          method: req.method,
          path: req.path,
          headers: requestHeaders(req),
          ...(body === undefined ? {} : { body }),
        }, ctl.signal);
      }
      const res = await fetch(this.#base + req.path, {
        method: req.method,
        ...(this.#client ? { client: this.#client } : {}),
        signal: ctl.signal,
        redirect: "follow", // cluster members redirect to the one that owns the resource
        headers: requestHeaders(req),
        ...(req.body === undefined ? {} : { body: encodeBody(req.body) as BodyInit }),
      });
      const body = new Uint8Array(await res.arrayBuffer());
      return { status: res.status, headers: res.headers, body };
    } catch (e) {
      if (timedOut) throw this.#timeout(req, e);
      if (e instanceof IsbError) {
        throw new IsbError(e.code, `${req.method} ${req.path}: ${e.message}`, { cause: e });
      }
      if (isRefused(e)) throw this.#refused(e);
      throw this.#failure(req, e);
    } finally {
      cancel();
    }
  }

  /**
   * Opens a websocket to `path` (query included); resolves once the upgrade succeeded.
   * `setup` runs on the new socket before it connects, so a reader attached there misses
   * no frame (frames may arrive together with the upgrade answer).
   */
  async openWebSocket(
    path: string,
    timeoutMs: number,
    setup?: (ws: WsClient) => void,
  ): Promise<WsClient> {
    const ws = new WsClient();
    setup?.(ws);
    const where = path.split("?", 1)[0] ?? path; // the query holds the secret: never show it
    let cancel: (() => void) | undefined;
    const deadline = new Promise<never>((_, reject) => {
      cancel = after(
        timeoutMs,
        () => reject(this.#timeout({ method: "GET", path: where, timeoutMs }, undefined)),
      );
    });
    try {
      await Promise.race([ws.connect(this.#wsTarget(), path), deadline]);
      return ws;
    } catch (e) {
      ws.terminate();
      throw this.#wsFailure(where, e);
    } finally {
      cancel?.();
    }
  }

  #wsTarget(): WsTarget {
    const ep = this.endpoint;
    if ("socket" in ep) return { socket: ep.socket };
    const u = new URL(this.#base);
    return {
      hostname: u.hostname.replace(/^\[|\]$/g, ""),
      port: Number(u.port || 8443),
      cert: ep.tls.cert,
      key: ep.tls.key,
      ...(ep.tls.caCerts ? { caCerts: ep.tls.caCerts } : {}),
    };
  }

  #wsFailure(where: string, e: unknown): IsbError {
    if (e instanceof IsbError) return e;
    if (isRefused(e)) return this.#refused(e);
    const msg = e instanceof Error ? e.message : String(e);
    return new IsbError("websocket", `open websocket ${where}: ${msg}`, { cause: e });
  }

  #refused(e: unknown): IsbError {
    const msg = e instanceof Error ? e.message : String(e);
    return new IsbError("connect", `cannot connect to incusd at ${this.where}: ${msg}`, {
      data: { socket: this.where },
      cause: e,
    });
  }

  /** Releases pooled connections (HTTPS; the unix socket keeps none). */
  close(): void {
    this.#client?.close();
  }

  #timeout(req: Pick<HttpRequest, "method" | "path" | "timeoutMs">, cause: unknown): IsbError {
    const path = req.path;
    return new IsbError(
      "request_timeout",
      `incusd did not answer ${req.method} ${path} within ${formatDuration(req.timeoutMs)}`,
      { data: { method: req.method, path, timeout_secs: req.timeoutMs / 1000 }, cause },
    );
  }

  #failure(req: HttpRequest, e: unknown): IsbError {
    const full = errorDetail(e);
    const connect = /\(Connect\):\s*(.*)$/s.exec(full);
    if (connect) {
      return new IsbError(
        "connect",
        `cannot connect to incusd at ${this.where}: ${connect[1]}`,
        { data: { socket: this.where }, cause: e },
      );
    }
    const detail = full.replace(/^error sending request for url \([^)]*\): /, "")
      .replace(/^client error \(\w+\): /, "");
    const code = /invalid|parse|malformed|HTTP/i.test(detail) &&
        !/closed|reset|broken pipe|incomplete/i.test(detail)
      ? "protocol"
      : "io";
    const path = req.path;
    const what = code === "protocol" ? "bad response from incusd" : "connection to incusd failed";
    return new IsbError(code, `${req.method} ${path}: ${what}: ${detail}`, { cause: e });
  }
}

/** An OS error of a connect that found nobody to talk to. */
function isRefused(e: unknown): boolean {
  return e instanceof Deno.errors.NotFound || e instanceof Deno.errors.ConnectionRefused ||
    e instanceof Deno.errors.PermissionDenied;
}

/** The innermost message of a fetch failure (fetch wraps the OS error in `cause`). */
export function errorDetail(e: unknown): string {
  let cur: unknown = e;
  let msg = String(e);
  for (let i = 0; i < 5 && cur instanceof Error; i++) {
    msg = cur.message;
    cur = cur.cause;
  }
  return msg;
}

function requestHeaders(req: HttpRequest): Record<string, string> {
  const h: Record<string, string> = { ...req.headers };
  if (req.body !== undefined && !(req.body instanceof Uint8Array)) {
    h["content-type"] ??= "application/json";
  }
  return h;
}

function encodeBody(body: unknown): Uint8Array<ArrayBuffer> {
  if (body instanceof Uint8Array) return body as Uint8Array<ArrayBuffer>;
  return new TextEncoder().encode(JSON.stringify(body));
}
