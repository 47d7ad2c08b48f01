/**
 * A scripted Anthropic Messages API on loopback, for the agents that speak it (Claude Code,
 * Pi, opencode): `POST /v1/messages` as SSE (or JSON without `stream`), with tool use
 * through whichever write tool the request offers (`Write {file_path}`, `write {path}` or
 * `write {filePath}`), `POST /v1/messages/count_tokens`, and 404 in the API's error shape
 * for anything else (Claude's start-up probes tolerate it). The script is mock_model.ts's.
 *
 * @module
 */

import {
  decide,
  MOCK_USAGE,
  type MockServer,
  notFound,
  type QueuedReply,
  record,
  serveMock,
  sseResponse,
} from "./mock_model.ts";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b) =>
    isObj(b) && b.type === "text" && typeof b.text === "string"
      ? b.text
      : isObj(b) && b.type === "tool_result"
      ? textOf(b.content)
      : ""
  ).join("\n");
}

/** The tool call for a write: the request's own write tool, else its shell tool. */
function writeCall(tools: Obj[], path: string, word: string): { name: string; input: Obj } {
  const write = tools.find((t) => t.name === "Write" || t.name === "write");
  if (write) {
    const props = isObj(write.input_schema) && isObj(write.input_schema.properties)
      ? write.input_schema.properties
      : {};
    const key = ["file_path", "filePath", "path"].find((k) => k in props) ?? "file_path";
    return { name: String(write.name), input: { [key]: path, content: `${word}\n` } };
  }
  const shell = tools.find((t) => t.name === "Bash" || t.name === "bash");
  return {
    name: String(shell?.name ?? "Bash"),
    input: { command: `printf '%s\\n' ${word} > ${path}` },
  };
}

function answer(body: Obj): { blocks: Obj[]; stop: string } {
  const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isObj)
    .filter((m) => m.role !== "system");
  const last = messages.at(-1);
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter(isObj);
  const toolResult = last?.role === "user" && Array.isArray(last.content) &&
      last.content.some((b) => isObj(b) && b.type === "tool_result")
    ? textOf(last.content)
    : undefined;
  const d = decide(toolResult, last ? textOf(last.content) : "", messages.length);
  if (d.kind === "write" && tools.length > 0) {
    const call = writeCall(tools, d.path, d.word);
    return {
      blocks: [{ type: "tool_use", id: `toolu_${crypto.randomUUID().slice(0, 12)}`, ...call }],
      stop: "tool_use",
    };
  }
  const text = d.kind === "write" ? `MOCK_REPLY no tools to write ${d.path}` : d.text;
  return { blocks: [{ type: "text", text }], stop: "end_turn" };
}

function stream(model: string, blocks: Obj[], stop: string, delayMs: number): Response {
  const id = `msg_${crypto.randomUUID().slice(0, 12)}`;
  const events: Obj[] = [{
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      usage: {
        input_tokens: MOCK_USAGE.input,
        cache_read_input_tokens: MOCK_USAGE.cacheRead,
        cache_creation_input_tokens: MOCK_USAGE.cacheWrite,
        output_tokens: 1,
      },
    },
  }];
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      events.push({
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" },
      });
      events.push({
        type: "content_block_delta",
        index,
        delta: { type: "text_delta", text: b.text },
      });
    } else {
      events.push({
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: b.id, name: b.name, input: {} },
      });
      events.push({
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) },
      });
    }
    events.push({ type: "content_block_stop", index });
  });
  events.push({
    type: "message_delta",
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: MOCK_USAGE.output },
  });
  events.push({ type: "message_stop" });
  return sseResponse(events, delayMs);
}

/** A scripted turn: the reply to a request body, or undefined for the default rules. */
export type MockScript = (body: Obj) => Promise<{ blocks: Obj[]; stop: string } | undefined>;

async function handle(
  req: Request,
  mock: MockServer,
  next?: QueuedReply,
  script?: MockScript,
): Promise<Response> {
  const r = await record(req, "http");
  mock.requests.push(r);
  const path = r.path.split("?")[0]!;
  if (req.method === "POST" && path === "/v1/messages/count_tokens") {
    return Response.json({ input_tokens: MOCK_USAGE.input });
  }
  if (req.method !== "POST" || path !== "/v1/messages") return notFound(path);
  if (next && "status" in next) {
    return new Response(next.body, {
      status: next.status,
      headers: { "content-type": "application/json" },
    });
  }
  const body = r.json ?? {};
  const model = typeof body.model === "string" ? body.model : "mock";
  const { blocks, stop } = (await script?.(body)) ?? answer(body);
  if (body.stream === true) return stream(model, blocks, stop, next?.delayMs ?? 0);
  return Response.json({
    id: `msg_${crypto.randomUUID().slice(0, 12)}`,
    type: "message",
    role: "assistant",
    model,
    content: blocks,
    stop_reason: stop,
    usage: { input_tokens: MOCK_USAGE.input, output_tokens: MOCK_USAGE.output },
  }, { headers: { "request-id": crypto.randomUUID() } });
}

/** Starts the mock on loopback (`port` 0 picks one); `script` answers turns it takes on. */
export function startMockAnthropic(
  opts: { port?: number; script?: MockScript } = {},
): MockServer {
  const { script, ...rest } = opts;
  return serveMock(
    (req, mock, next) => handle(req, mock, next, script),
    (p) => p === "/v1/messages",
    rest,
  );
}
