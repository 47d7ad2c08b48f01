/**
 * A scripted OpenAI Responses API on loopback, for Codex: `POST /v1/responses` as SSE, and
 * the same over a WebSocket (`GET /v1/responses` with an upgrade: each `response.create`
 * message gets the events as text messages), so both of Codex's transports are covered.
 * A write is asked for with the request's own tool: `exec_command` (classic tools), the
 * code-mode `exec` (JavaScript calling `tools.exec_command`), or `shell`/`shell_command`.
 * A warm-up request (`generate: false`) gets an empty response and is not a model call.
 * Anything else is a 404. The script is mock_model.ts's.
 *
 * @module
 */

import {
  decide,
  MOCK_USAGE,
  type MockRequest,
  type MockServer,
  notFound,
  type QueuedReply,
  record,
  serveMock,
  sseResponse,
} from "./mock_model.ts";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function textOf(item: Obj | undefined): string {
  if (!item) return "";
  if (typeof item.output === "string") return item.output;
  const parts = Array.isArray(item.content)
    ? item.content
    : Array.isArray(item.output)
    ? item.output
    : [];
  return parts.map((p) => isObj(p) && typeof p.text === "string" ? p.text : "").join("\n");
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

function writeItem(body: Obj, items: Obj[], path: string, word: string): Obj | undefined {
  const cmd = `printf '%s\\n' ${shellQuote(word)} > ${shellQuote(path)}`;
  const id = `call_${crypto.randomUUID().slice(0, 8)}`;
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter(isObj);
  const names = new Set(tools.map((t) => t.name));
  if (names.has("exec_command")) {
    return {
      type: "function_call",
      id: `fc_${id}`,
      call_id: id,
      name: "exec_command",
      arguments: JSON.stringify({ cmd }),
      status: "completed",
    };
  }
  if (names.has("exec") || items.some((i) => i.type === "additional_tools")) {
    return {
      type: "custom_tool_call",
      id: `ctc_${id}`,
      call_id: id,
      name: "exec",
      input: `const r = await tools.exec_command({cmd: ${
        JSON.stringify(cmd)
      }});\ntext(r.output);\n`,
      status: "completed",
    };
  }
  if (names.has("shell_command")) {
    return {
      type: "function_call",
      call_id: id,
      name: "shell_command",
      arguments: JSON.stringify({ command: cmd }),
    };
  }
  if (names.has("shell")) {
    return {
      type: "function_call",
      call_id: id,
      name: "shell",
      arguments: JSON.stringify({ command: ["bash", "-lc", cmd] }),
    };
  }
  return undefined;
}

/** The response events for one request body. */
export function responseEvents(body: Obj): Obj[] {
  if (body.generate === false) return warmup(body);
  const items = (Array.isArray(body.input) ? body.input : []).filter(isObj);
  const talk = items.filter((i) => i.type !== "additional_tools" && i.role !== "developer");
  const last = talk.at(-1);
  const isResult = last?.type === "function_call_output" ||
    last?.type === "custom_tool_call_output";
  const lastUser = [...talk].reverse().find((i) => i.role === "user");
  const d = decide(isResult ? textOf(last) : undefined, textOf(lastUser), talk.length);
  let item: Obj | undefined;
  if (d.kind === "write") item = writeItem(body, items, d.path, d.word);
  item ??= {
    type: "message",
    role: "assistant",
    id: `msg_${crypto.randomUUID().slice(0, 8)}`,
    status: "completed",
    content: [{
      type: "output_text",
      text: d.kind === "write" ? `MOCK_REPLY no tool to write ${d.path}` : d.text,
      annotations: [],
    }],
  };
  const id = `resp_${crypto.randomUUID().slice(0, 12)}`;
  const model = typeof body.model === "string" ? body.model : "mock";
  const input = MOCK_USAGE.input + MOCK_USAGE.cacheRead;
  return [
    {
      type: "response.created",
      response: { id, object: "response", status: "in_progress", model, output: [] },
    },
    {
      type: "response.output_item.added",
      output_index: 0,
      item: { ...item, status: "in_progress" },
    },
    { type: "response.output_item.done", output_index: 0, item },
    {
      type: "response.completed",
      response: {
        id,
        object: "response",
        status: "completed",
        model,
        output: [item],
        usage: {
          input_tokens: input,
          input_tokens_details: { cached_tokens: MOCK_USAGE.cacheRead },
          output_tokens: MOCK_USAGE.output,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: input + MOCK_USAGE.output,
        },
      },
    },
  ];
}

/** A warm-up (`generate: false`): a response with no output and no tokens, as the API does. */
function warmup(body: Obj): Obj[] {
  const id = `resp_${crypto.randomUUID().slice(0, 12)}`;
  const model = typeof body.model === "string" ? body.model : "mock";
  const usage = { input_tokens: 0, output_tokens: 0, total_tokens: 0 };
  return [
    { type: "response.created", response: { id, status: "in_progress", model, output: [] } },
    { type: "response.completed", response: { id, status: "completed", model, output: [], usage } },
  ];
}

function upgrade(req: Request, mock: MockServer): Response {
  const headers: Record<string, string> = {};
  req.headers.forEach((v, k) => headers[k] = v); // before the upgrade takes the request
  const { socket, response } = Deno.upgradeWebSocket(req);
  socket.onmessage = (ev) => {
    if (typeof ev.data !== "string") return;
    let body: Obj = {};
    try {
      const v: unknown = JSON.parse(ev.data);
      if (isObj(v)) body = v;
    } catch { /* not JSON: answered as an empty request */ }
    const r: MockRequest = {
      method: "WS",
      path: new URL(req.url).pathname,
      headers,
      body: ev.data,
      json: body,
      via: "websocket",
    };
    mock.requests.push(r);
    const q = body.generate === false ? undefined : mock.takeQueued();
    void (async () => {
      for (const e of responseEvents(body)) {
        if (q && "delayMs" in q) await new Promise((res) => setTimeout(res, q.delayMs));
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(e));
      }
    })();
  };
  socket.onerror = () => {};
  return response;
}

async function handle(req: Request, mock: MockServer, next?: QueuedReply): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (req.headers.get("upgrade")?.toLowerCase() === "websocket" && path === "/v1/responses") {
    return upgrade(req, mock);
  }
  const r = await record(req, "http");
  mock.requests.push(r);
  if (req.method !== "POST" || path !== "/v1/responses") return notFound(path);
  if (next && "status" in next) {
    return new Response(next.body, {
      status: next.status,
      headers: { "content-type": "application/json" },
    });
  }
  return sseResponse(responseEvents(r.json ?? {}), next?.delayMs ?? 0);
}

/** Starts the mock on loopback (`port` 0 picks one). */
export function startMockOpenAI(opts: { port?: number } = {}): MockServer {
  return serveMock(handle, (p) => p === "/v1/responses", opts);
}
