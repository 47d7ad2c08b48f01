/**
 * A fake incusd on a real unix socket, for what the real daemon will not do on demand.
 *
 * It answers from a route table (`{route: "GET /1.0/instances/web", status, metadata}`),
 * wrapping replies in the Incus envelope, and answers 404 otherwise. A route may instead
 * start a background operation (`operation: {...}`) that `/1.0/operations/<id>/wait`
 * reports, possibly never finishing (and recording a `DELETE` as a cancellation), or
 * misbehave: `hang` (never answer), `garbage` (non-HTTP bytes), `drop` (close without
 * answering). Every request is recorded. Each connection gets one answer and
 * `Connection: close`, like isb's client expects. Point code at it with `INCUS_SOCKET`.
 *
 * @module
 */

/** One route of the table. `route` is `"METHOD /path"` (query ignored unless it has `?`). */
export interface FakeRoute {
  route: string;
  /** HTTP status (default 200; ≥400 answers an error envelope). */
  status?: number;
  /** The envelope's metadata. */
  metadata?: unknown;
  /** Error text for status ≥400. */
  error?: string;
  /** An ETag header. */
  etag?: string;
  /** Extra response headers. */
  headers?: Record<string, string>;
  /** A raw body instead of an envelope. */
  body?: string | Uint8Array;
  /** Misbehave instead of answering. */
  behaviour?: "hang" | "garbage" | "drop";
  /** Answer with an async operation ending like this. */
  operation?: FakeOperationSpec;
}

/** How a fake operation ends. */
export interface FakeOperationSpec {
  /** `Success` (default), `Failure`, or `Running` (never finishes). */
  status?: "Success" | "Failure" | "Running";
  /** Error text of a failure. */
  err?: string;
  /** The operation's own metadata (e.g. `{return: 3}`). */
  metadata?: Record<string, unknown>;
  /** Whether `DELETE` may cancel it (default true). */
  mayCancel?: boolean;
  /** While running, answer each wait with HTTP 500 and this text (incusd 6.0 does). */
  waitError?: string;
}

/** A request as the fake saw it. */
export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Headers;
  body: Uint8Array;
}

/** A running fake. */
export interface FakeIncusd extends AsyncDisposable {
  /** The socket path. */
  readonly socket: string;
  /** Every request, in arrival order. */
  readonly requests: RecordedRequest[];
  /** Operation ids that received a `DELETE`. */
  readonly cancelled: string[];
  /** Adds (or replaces) a route. */
  route(r: FakeRoute): void;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

const CODES: Record<string, number> = { Success: 200, Failure: 400, Running: 103, Cancelled: 401 };

/** Starts a fake incusd in a fresh temporary directory. */
export async function startFakeIncusd(routes: FakeRoute[] = []): Promise<FakeIncusd> {
  const dir = await Deno.makeTempDir({ prefix: "fake-incusd-" });
  const socket = `${dir}/unix.socket`;
  const listener = Deno.listen({ transport: "unix", path: socket });
  const table = new Map<string, FakeRoute>();
  const ops = new Map<string, Record<string, unknown>>();
  const conns = new Set<Deno.Conn>();
  const requests: RecordedRequest[] = [];
  const cancelled: string[] = [];
  const tasks = new Set<Promise<void>>();
  for (const r of routes) table.set(r.route, r);

  function answer(req: RecordedRequest): FakeRoute {
    const opMatch = /^\/1\.0\/operations\/([^/]+)(\/wait)?$/.exec(req.path);
    const op = opMatch ? ops.get(opMatch[1]!) : undefined;
    if (op && req.method === "DELETE") {
      if (!op.may_cancel) return { route: "", status: 403, error: "Operation can't be cancelled" };
      cancelled.push(String(op.id));
      Object.assign(op, { status: "Cancelled", status_code: 401, err: "Operation cancelled" });
      return { route: "", metadata: {} };
    }
    if (op && req.method === "GET" && opMatch?.[2] && op.status_code === 103 && op.wait_error) {
      return { route: "", status: 500, error: String(op.wait_error) };
    }
    if (op && req.method === "GET") return { route: "", metadata: op };
    const full = `${req.method} ${req.path}?${req.query}`;
    const found = table.get(full) ?? table.get(`${req.method} ${req.path}`);
    if (!found) return { route: "", status: 404, error: "not found" };
    if (!found.operation) return found;
    const id = crypto.randomUUID();
    const s = found.operation.status ?? "Success";
    ops.set(id, {
      id,
      class: "task",
      description: found.route,
      status: s,
      status_code: CODES[s],
      resources: null,
      metadata: found.operation.metadata ?? null,
      may_cancel: found.operation.mayCancel ?? true,
      err: found.operation.err ?? "",
      ...(found.operation.waitError ? { wait_error: found.operation.waitError } : {}),
    });
    return {
      ...found,
      status: 202,
      metadata: { ...ops.get(id), status: "Running", status_code: 103 },
    };
  }

  async function serve(conn: Deno.Conn): Promise<void> {
    conns.add(conn);
    try {
      const req = await readRequest(conn);
      if (!req) return;
      requests.push(req);
      const r = answer(req);
      if (r.behaviour === "hang") return void await conn.read(new Uint8Array(1)); // until closed
      if (r.behaviour === "drop") return;
      if (r.behaviour === "garbage") {
        return void await writeAll(conn, new TextEncoder().encode("\x00\x01garbage\r\n\r\n"));
      }
      const id = /^\/1\.0\/operations\/([^/]+)\/wait$/.exec(req.path)?.[1];
      if (id && (Number(ops.get(id)?.status_code) || 200) < 200) { // a running op: long-poll
        const secs = Number(req.query.get("timeout") ?? "0");
        await new Promise((ok) => setTimeout(ok, Math.min(secs * 1000, 100)));
      }
      await writeAll(conn, encodeResponse(r));
    } catch {
      // the client went away
    } finally {
      conns.delete(conn);
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  }

  const accepting = (async () => {
    for await (const conn of listener) {
      const t = serve(conn);
      tasks.add(t);
      t.finally(() => tasks.delete(t));
    }
  })();

  async function close(): Promise<void> {
    listener.close();
    await accepting.catch(() => {});
    for (const c of conns) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
    await Promise.allSettled([...tasks]);
    await Deno.remove(dir, { recursive: true });
  }

  return {
    socket,
    requests,
    cancelled,
    route: (r) => void table.set(r.route, r),
    close,
    [Symbol.asyncDispose]: close,
  };
}

function encodeResponse(r: FakeRoute): Uint8Array {
  const status = r.status ?? 200;
  let body: Uint8Array;
  const headers: Record<string, string> = { ...r.headers };
  if (r.body !== undefined) {
    body = typeof r.body === "string" ? new TextEncoder().encode(r.body) : r.body;
  } else {
    const env = status >= 400
      ? { type: "error", error: r.error ?? `HTTP ${status}`, error_code: status, metadata: null }
      : status === 202
      ? {
        type: "async",
        status: "Operation created",
        status_code: 100,
        operation: `/1.0/operations/${(r.metadata as { id: string }).id}`,
        metadata: r.metadata,
      }
      : { type: "sync", status: "Success", status_code: 200, metadata: r.metadata ?? {} };
    body = new TextEncoder().encode(JSON.stringify(env));
    headers["content-type"] = "application/json";
  }
  if (r.etag) headers["etag"] = r.etag;
  const head = [`HTTP/1.1 ${status} X`, `content-length: ${body.length}`, "connection: close"];
  for (const [k, v] of Object.entries(headers)) head.push(`${k}: ${v}`);
  const h = new TextEncoder().encode(head.join("\r\n") + "\r\n\r\n");
  const out = new Uint8Array(h.length + body.length);
  out.set(h);
  out.set(body, h.length);
  return out;
}

async function readRequest(conn: Deno.Conn): Promise<RecordedRequest | undefined> {
  let buf: Uint8Array = new Uint8Array(0);
  const chunk = new Uint8Array(65536);
  let headEnd = -1;
  let need = Infinity;
  while (buf.length < need) {
    const n = await conn.read(chunk);
    if (n === null) return undefined;
    buf = concat(buf, chunk.subarray(0, n));
    if (headEnd < 0) {
      headEnd = indexOfCrlf2(buf);
      if (headEnd >= 0) {
        const head = new TextDecoder().decode(buf.subarray(0, headEnd));
        const len = /\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1];
        need = headEnd + 4 + Number(len ?? 0);
      }
    }
  }
  const lines = new TextDecoder().decode(buf.subarray(0, headEnd)).split("\r\n");
  const [method = "", target = ""] = (lines[0] ?? "").split(" ");
  const url = new URL(target, "http://incus");
  const headers = new Headers();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) headers.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
  }
  const body = buf.slice(headEnd + 4, need);
  return { method, path: decodeURIComponent(url.pathname), query: url.searchParams, headers, body };
}

function indexOfCrlf2(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.length) off += await conn.write(data.subarray(off));
}
