/**
 * What the two mock model APIs (mock_anthropic.ts, mock_openai.ts) share: the recorded
 * request, the script that decides an answer from the request alone, and the loopback
 * server around a handler. The script is stateless because every agent resends the whole
 * conversation on resume (shared/reference/agents-notes.md §8), which is also what lets a
 * test see the earlier turns in a resumed run's request:
 * 1. the last message is a tool result → the final text `MOCK_DONE: <excerpt>`;
 * 2. the user's text holds `MOCK_WRITE_FILE <path> <word>` → one call of the agent's own
 *    write (or shell) tool writing `<word>` to `<path>`;
 * 3. otherwise → `MOCK_REPLY n=<messages in the request> to: <prompt tail>`.
 * A test can queue replies that replace the script (an HTTP error, a slow stream).
 *
 * @module
 */

import { gunzipSync } from "node:zlib";

/** One request a mock saw. */
export interface MockRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The body as text (gunzipped when it came compressed). */
  body: string;
  /** The body parsed as JSON, when it was JSON. */
  json?: Record<string, unknown>;
  /** "http" or "websocket". */
  via: "http" | "websocket";
}

/** Usage the mocks report per model call (a test asserts these figures come back). */
export const MOCK_USAGE = { input: 1200, output: 34, cacheRead: 100, cacheWrite: 20 } as const;

/** A reply queued by a test for the next model call instead of the script. */
export type QueuedReply =
  | { status: number; body: string }
  | { delayMs: number };

/** The write command the mocks ask for: `MOCK_WRITE_FILE <path> <word>`. */
export const WRITE_RE = /MOCK_WRITE_FILE (\/[A-Za-z0-9._/-]+) ([A-Za-z0-9._-]+)/;

/** Base of a running mock. */
export interface MockServer {
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  port: number;
  /** Every request, in arrival order. */
  requests: MockRequest[];
  /** Only the model calls (`/v1/messages`, `/v1/responses`; not a `generate: false` warm-up). */
  modelCalls(): MockRequest[];
  /** Queues a reply for the next model call. */
  queue(reply: QueuedReply): void;
  /** Drops the replies still queued. */
  clearQueue(): void;
  /** Takes the next queued reply (for a model call that does not come as a request). */
  takeQueued(): QueuedReply | undefined;
  close(): Promise<void>;
}

/** The decision of the script. */
export type Decision =
  | { kind: "done"; text: string }
  | { kind: "write"; path: string; word: string }
  | { kind: "reply"; text: string };

/** The script's decision from the last message and the user's text. */
export function decide(
  lastIsToolResult: string | undefined,
  userText: string,
  n: number,
): Decision {
  if (lastIsToolResult !== undefined) {
    return { kind: "done", text: `MOCK_DONE: ${lastIsToolResult.slice(0, 120)}` };
  }
  const w = WRITE_RE.exec(userText);
  if (w) return { kind: "write", path: w[1]!, word: w[2]! };
  const tail = userText.trim().slice(-80).replace(/\s+/g, " ");
  return { kind: "reply", text: `MOCK_REPLY n=${n} to: ${tail}` };
}

/** Reads a request into a record. */
export async function record(req: Request, via: "http" | "websocket"): Promise<MockRequest> {
  const url = new URL(req.url);
  const raw = new Uint8Array(await req.arrayBuffer());
  const bytes = req.headers.get("content-encoding") === "gzip" ? gunzipSync(raw) : raw;
  const body = new TextDecoder().decode(bytes);
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => headers[k] = v);
  const r: MockRequest = {
    method: req.method,
    path: url.pathname + url.search,
    headers,
    body,
    via,
  };
  try {
    const j: unknown = JSON.parse(body);
    if (typeof j === "object" && j !== null && !Array.isArray(j)) {
      r.json = j as Record<string, unknown>;
    }
  } catch { /* not JSON */ }
  return r;
}

/** An SSE body from `[event, data]` pairs, spaced by `delayMs` when given. */
export function sseResponse(events: Record<string, unknown>[], delayMs = 0): Response {
  const enc = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    async start(ctl) {
      for (const e of events) {
        if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
        ctl.enqueue(enc.encode(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`));
      }
      ctl.close();
    },
  });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
  });
}

/** Serves `handler` on loopback (port 0 unless given) and wraps it as a MockServer. */
export function serveMock(
  handler: (req: Request, mock: MockServer, next: QueuedReply | undefined) => Promise<Response>,
  isModelCall: (path: string) => boolean,
  opts: { port?: number } = {},
): MockServer {
  const queued: QueuedReply[] = [];
  const mock = {} as MockServer;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: opts.port ?? 0, onListen() {} },
    (req) => {
      const model = isModelCall(new URL(req.url).pathname);
      return handler(req, mock, model ? queued.shift() : undefined);
    },
  );
  Object.assign(mock, {
    origin: `http://127.0.0.1:${server.addr.port}`,
    port: server.addr.port,
    requests: [],
    modelCalls: () =>
      mock.requests.filter((r) => isModelCall(r.path.split("?")[0]!) && r.json?.generate !== false),
    queue: (r: QueuedReply) => queued.push(r),
    clearQueue: () => queued.splice(0),
    takeQueued: () => queued.shift(),
    close: async () => {
      await server.shutdown();
    },
  });
  return mock;
}

/** A 404 in the API's error shape. */
export function notFound(path: string): Response {
  return Response.json({ type: "error", error: { type: "not_found_error", message: path } }, {
    status: 404,
  });
}
