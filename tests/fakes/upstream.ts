/**
 * Loopback stand-ins for the services the proxy intercepts, recording what they receive.
 * The guest side of a proxy test (a raw HTTP/1.1 client over TLS, a port-keyed caller
 * lookup) is in guest_client.ts, re-exported here.
 *
 * The fake upstream answers:
 * - `POST /v1/messages`: Anthropic-shaped; `"stream": true` → SSE with `message_start`
 *   usage then `message_delta` usage; else JSON. The body echoes the `x-api-key` it got,
 *   so a test can check the proxy scrubs real values from responses.
 * - `POST /v1/projects/…:rawPredict` / `:streamRawPredict`: Vertex AI, answered as
 *   `/v1/messages` (streamed for `:streamRawPredict`); the echoed key is `authorization`; a
 *   model id containing `unauthorized` gets 401 (an expired token).
 * - `POST /v1/responses`, `POST /v1/chat/completions`: OpenAI-shaped usage.
 * - `POST /v1/messages` with `"hold": true`, or `GET /hold`: streams one event, then holds
 *   the response open until the client goes.
 * - `POST /v1/messages` with `"slow_ms": N` (and `"stream": true`): SSE paced over N ms
 *   (a ping every 500 ms), ending with the key it got and the usual usage.
 * - With `validKeys` set, a request whose `x-api-key` or `authorization` is not among them
 *   gets 401 (a rotated or expired credential); `quote` is added to JSON message answers
 *   (a server quoting some value back).
 * - `GET /echo`: the request head as JSON.
 * - `GET /ws` (WebSocket): first sends the `authorization` it got, then echoes messages
 *   (binary ones as binary); `binary-key` gets the `authorization` back in a binary
 *   message, `close-with-key` a close whose reason names it.
 * - any request with `x-fake-content-encoding: gzip|deflate|deflate-raw|br|…`: the answer
 *   compressed so (ignoring `Accept-Encoding`, as a misbehaving server would).
 * Anything else: 404.
 *
 * @module
 */

import { brotliCompressSync } from "node:zlib";
export * from "./guest_client.ts";

const enc = new TextEncoder();

/** One request the fake saw. */
export interface Recorded {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** Usage the fake reports for a streamed message. */
export const STREAM_USAGE = { input: 11, output: 7, cacheRead: 5, cacheCreation: 3 } as const;

/** A running fake upstream. */
export interface FakeUpstream {
  origin: string;
  port: number;
  requests: Recorded[];
  /** Held `/hold` responses whose client went away. */
  cancelled: number;
  /** When set, only these keys are accepted (others get 401). */
  validKeys: Set<string> | undefined;
  /** When set, JSON message answers carry it as `quote`. */
  quote: string | undefined;
  close(): Promise<void>;
}

function sse(events: object[]): string {
  return events.map((e) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`)
    .join("");
}

function held(state: { cancelled: number }): Response {
  let timer: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(
        enc.encode(sse([{ type: "message_start", message: { usage: { input_tokens: 1 } } }])),
      );
      timer = setInterval(() => ctl.enqueue(enc.encode(": ping\n\n")), 50);
    },
    cancel() {
      clearInterval(timer);
      state.cancelled++;
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream" } });
}

/** An SSE answer paced over `ms` (a ping every 500 ms), ending with `key` and usage. */
function paced(ms: number, key: string): Response {
  let timer: ReturnType<typeof setInterval> | undefined;
  const started = Date.now();
  const u = STREAM_USAGE;
  const stream = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(enc.encode(sse([{
        type: "message_start",
        message: { usage: { input_tokens: u.input, output_tokens: 1 } },
      }])));
      timer = setInterval(() => {
        if (Date.now() - started < ms) return ctl.enqueue(enc.encode(": ping\n\n"));
        clearInterval(timer);
        ctl.enqueue(enc.encode(sse([
          { type: "content_block_delta", delta: { type: "text_delta", text: `key was ${key}` } },
          { type: "message_delta", usage: { output_tokens: u.output } },
          { type: "message_stop" },
        ])));
        ctl.close();
      }, 500);
    },
    cancel() {
      clearInterval(timer);
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream" } });
}

/**
 * `res` compressed as `coding` (`gzip`, `deflate`, `deflate-raw` sent as `deflate`, `br`),
 * or only labelled so for any other coding; the body streams for the first three.
 */
async function encoded(res: Response, coding: string): Promise<Response> {
  const headers = new Headers(res.headers);
  headers.delete("content-length");
  headers.set("content-encoding", coding === "deflate-raw" ? "deflate" : coding);
  let body: BodyInit | null = res.body;
  if (coding === "gzip" || coding === "deflate" || coding === "deflate-raw") {
    body = res.body!.pipeThrough(
      new CompressionStream(coding) as unknown as TransformStream<Uint8Array, Uint8Array>,
    );
  } else if (coding === "br") {
    body = new Uint8Array(brotliCompressSync(new Uint8Array(await res.arrayBuffer())));
  }
  return new Response(body, { status: res.status, headers });
}

/** Starts the fake on 127.0.0.1 (plain HTTP; the proxy reaches it through a test override). */
export function startFakeUpstream(): FakeUpstream {
  const requests: Recorded[] = [];
  const state = {
    cancelled: 0,
    validKeys: undefined as Set<string> | undefined,
    quote: undefined as string | undefined,
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const coding = req.headers.get("x-fake-content-encoding");
    const res = await respond(req);
    return coding ? await encoded(res, coding) : res;
  });
  async function respond(req: Request): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname === "/ws" && req.headers.get("upgrade")?.toLowerCase() === "websocket") {
      requests.push({
        method: "WS",
        path: "/ws",
        headers: Object.fromEntries(req.headers),
        body: "",
      });
      const { socket, response } = Deno.upgradeWebSocket(req);
      socket.onopen = () =>
        socket.send(JSON.stringify({ authorization: req.headers.get("authorization") }));
      socket.binaryType = "arraybuffer";
      const auth = req.headers.get("authorization") ?? "";
      socket.onmessage = (ev) => {
        if (ev.data instanceof ArrayBuffer) {
          const echo = new Uint8Array(5 + ev.data.byteLength);
          echo.set(enc.encode("echo:"));
          echo.set(new Uint8Array(ev.data), 5);
          socket.send(echo);
        } else if (ev.data === "binary-key") socket.send(enc.encode(`key:${auth}`));
        else if (ev.data === "close-with-key") socket.close(4000, `bye ${auth}`);
        else socket.send(`echo:${ev.data}`);
      };
      return response;
    }
    const body = await req.text();
    requests.push({
      method: req.method,
      path: url.pathname + url.search,
      headers: Object.fromEntries(req.headers),
      body,
    });
    const key = req.headers.get("x-api-key") ?? req.headers.get("authorization") ?? "";
    if (state.validKeys && !state.validKeys.has(key.replace(/^Bearer /, ""))) {
      return Response.json({ type: "error", error: { type: "authentication_error" } }, {
        status: 401,
      });
    }
    const slow = /"slow_ms":(\d+)/.exec(body);
    if (url.pathname === "/v1/messages" && slow) return paced(Number(slow[1]), key);
    if (
      url.pathname === "/hold" || (url.pathname === "/v1/messages" && body.includes('"hold":true'))
    ) {
      return held(state);
    }
    const vertex = /^\/v1\/projects\/[^?]*:(stream)?[rR]awPredict$/.exec(url.pathname);
    if (vertex && url.pathname.includes("unauthorized")) {
      return Response.json({ error: { code: 401, status: "UNAUTHENTICATED" } }, { status: 401 });
    }
    if (url.pathname === "/v1/messages" || vertex) {
      const stream = vertex ? vertex[1] === "stream" : body.includes('"stream":true');
      if (!stream) {
        return Response.json({
          id: "m",
          echo: key,
          ...(state.quote ? { quote: state.quote } : {}),
          usage: { input_tokens: 3, output_tokens: 4 },
        });
      }
      const u = STREAM_USAGE;
      const text = sse([
        {
          type: "message_start",
          message: {
            usage: {
              input_tokens: u.input,
              output_tokens: 1,
              cache_read_input_tokens: u.cacheRead,
              cache_creation_input_tokens: u.cacheCreation,
            },
          },
        },
        { type: "content_block_delta", delta: { type: "text_delta", text: `key was ${key}` } },
        { type: "message_delta", usage: { output_tokens: u.output } },
        { type: "message_stop" },
      ]);
      const bytes = enc.encode(text);
      // Sent in small pieces so events straddle chunk boundaries.
      const pieces = Array.from(
        { length: Math.ceil(bytes.length / 17) },
        (_, i) => bytes.slice(i * 17, i * 17 + 17),
      );
      return new Response(ReadableStream.from(pieces), {
        headers: { "content-type": "text/event-stream" },
      });
    }
    if (url.pathname === "/v1/responses" || url.pathname === "/v1/chat/completions") {
      const usage = url.pathname === "/v1/responses"
        ? { input_tokens: 20, input_tokens_details: { cached_tokens: 5 }, output_tokens: 6 }
        : { prompt_tokens: 20, prompt_tokens_details: { cached_tokens: 5 }, completion_tokens: 6 };
      return Response.json({ id: "r", usage });
    }
    if (url.pathname === "/echo") {
      return Response.json({ headers: Object.fromEntries(req.headers) });
    }
    return new Response("no such path", { status: 404 });
  }
  return {
    origin: `http://127.0.0.1:${server.addr.port}`,
    port: server.addr.port,
    requests,
    get cancelled() {
      return state.cancelled;
    },
    get validKeys() {
      return state.validKeys;
    },
    set validKeys(v) {
      state.validKeys = v;
    },
    get quote() {
      return state.quote;
    },
    set quote(v) {
      state.quote = v;
    },
    close: () => server.shutdown(),
  };
}
