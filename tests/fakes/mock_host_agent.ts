/**
 * A scripted Anthropic Messages API on loopback that plays the *host* agent's model: it drives
 * the MCP tools a real Claude Code exposes (`mcp__<server>__<tool>`) through a fixed script,
 * and records every tool result as the model received it (what the model would see), for the
 * test to check. Stateless, like a model: each answer comes from the request's history alone.
 *
 * Claude Code defers MCP tools behind its `ToolSearch` tool (their schemas are not in the
 * request until fetched), so the first step selects the script's tools by name
 * (`select:mcp__isx__list_templates,…`). A request without tools (a side call such as a title)
 * gets plain text. SSE for `stream: true`, JSON otherwise.
 *
 * @module
 */

import { notFound, record, serveMock, sseResponse } from "./mock_model.ts";
import type { MockServer } from "./mock_model.ts";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** One tool result the model received. */
export interface SeenResult {
  /** The tool as the model named it (`ToolSearch`, `mcp__isx__exec`, …). */
  tool: string;
  /** What the model sent. */
  input: Obj;
  /** The result's text, as the model got it. */
  text: string;
  /** `is_error` of the result. */
  isError: boolean;
}

/** One scripted step: a tool of the MCP server and its input, computed from what was seen. */
export interface ScriptStep {
  /** The MCP tool's own name (`exec`). */
  tool: string;
  /** Its input; `seen` holds the results so far, ToolSearch's included. */
  input: (seen: SeenResult[]) => Obj;
}

/** The mock, with what the model saw. */
export interface MockHostAgent extends MockServer {
  /** The tool results of the longest history received (the whole run, once it ended). */
  seen(): SeenResult[];
  /** The final text the model gave, once the script ran through ("" before). */
  finalText(): string;
}

/** The text of a tool_result's content (a string, or text blocks; tool references named). */
function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b) =>
    isObj(b) && typeof b.text === "string"
      ? b.text
      : isObj(b) && b.type === "tool_reference"
      ? `<tool_reference ${String(b.tool_name)}>`
      : ""
  ).join("\n");
}

/** Every tool call of the history with its result, in order. */
function history(messages: Obj[]): SeenResult[] {
  const calls = new Map<string, { tool: string; input: Obj }>();
  const out: SeenResult[] = [];
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue;
    for (const b of m.content.filter(isObj)) {
      if (m.role === "assistant" && b.type === "tool_use") {
        calls.set(String(b.id), { tool: String(b.name), input: isObj(b.input) ? b.input : {} });
      }
      if (m.role === "user" && b.type === "tool_result") {
        const call = calls.get(String(b.tool_use_id));
        if (call) {
          out.push({ ...call, text: resultText(b.content), isError: b.is_error === true });
        }
      }
    }
  }
  return out;
}

function events(model: string, blocks: Obj[], stop: string): Obj[] {
  const ev: Obj[] = [{
    type: "message_start",
    message: {
      id: `msg_${crypto.randomUUID().slice(0, 12)}`,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      usage: { input_tokens: 100, output_tokens: 1 },
    },
  }];
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      ev.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
      ev.push({ type: "content_block_delta", index, delta: { type: "text_delta", text: b.text } });
    } else {
      ev.push({
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: b.id, name: b.name, input: {} },
      });
      ev.push({
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) },
      });
    }
    ev.push({ type: "content_block_stop", index });
  });
  ev.push({
    type: "message_delta",
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: 10 },
  });
  ev.push({ type: "message_stop" });
  return ev;
}

/** Starts the mock for MCP server `server` (as registered: `isx`) and `script`. */
export function startMockHostAgent(server: string, script: ScriptStep[]): MockHostAgent {
  let longest: SeenResult[] = [];
  let finalText = "";
  const prefix = `mcp__${server}__`;
  const names = script.map((s) => `${prefix}${s.tool}`);
  const mock = serveMock(async (req, m) => {
    const r = await record(req, "http");
    m.requests.push(r);
    const path = r.path.split("?")[0]!;
    if (req.method === "POST" && path === "/v1/messages/count_tokens") {
      return Response.json({ input_tokens: 100 });
    }
    if (req.method !== "POST" || path !== "/v1/messages") return notFound(path);
    const body = r.json ?? {};
    const model = typeof body.model === "string" ? body.model : "mock";
    const tools = (Array.isArray(body.tools) ? body.tools : []).filter(isObj);
    const messages = (Array.isArray(body.messages) ? body.messages : []).filter(isObj)
      .filter((x) => x.role !== "system");
    const seen = history(messages);
    let blocks: Obj[];
    let stop = "tool_use";
    const toolUse = (name: string, input: Obj) => ({
      type: "tool_use",
      id: `toolu_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`,
      name,
      input,
    });
    if (tools.length === 0) {
      blocks = [{ type: "text", text: "isx session" }];
      stop = "end_turn";
    } else {
      if (seen.length > longest.length) longest = seen;
      const searched = seen.some((s) => s.tool === "ToolSearch");
      const loaded = tools.some((t) => t.name === names[0] && t.defer_loading !== true);
      const done = seen.filter((s) => s.tool.startsWith(prefix)).length;
      if (!searched && !loaded && tools.some((t) => t.name === "ToolSearch")) {
        blocks = [toolUse("ToolSearch", {
          query: `select:${[...new Set(names)].join(",")}`,
          max_results: names.length,
        })];
      } else if (done < script.length) {
        const step = script[done]!;
        blocks = [toolUse(`${prefix}${step.tool}`, step.input(seen))];
      } else {
        finalText = `MOCK_HOST_DONE after ${done} isx calls`;
        blocks = [{ type: "text", text: finalText }];
        stop = "end_turn";
      }
    }
    if (body.stream === true) return sseResponse(events(model, blocks, stop));
    return Response.json({
      id: `msg_${crypto.randomUUID().slice(0, 12)}`,
      type: "message",
      role: "assistant",
      model,
      content: blocks,
      stop_reason: stop,
      usage: { input_tokens: 100, output_tokens: 10 },
    });
  }, (p) => p === "/v1/messages");
  return Object.assign(mock, {
    seen: () => longest,
    finalText: () => finalText,
  });
}
