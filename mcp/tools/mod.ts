/**
 * Every tool of `isx mcp`, merged from the group tables, and the one edge where a call
 * becomes a result (§1.3): arguments parsed by our own zod schemas (a failure is the refusal
 * `invalid_argument`, not a JSON-RPC error), a success carries `structuredContent` matching
 * the tool's `outputSchema`, a refusal carries no structure and `_meta["dev.incusspawn/error"]`
 * with exactly `code`, `message` and the `instance`/`task_id` the call named. An unknown tool
 * or non-object arguments are protocol faults (-32602), thrown as {@link ProtocolFault}.
 * `tools/list` is served from `catalog.ts` (generated from these definitions), so the
 * protocol layer answers it without loading this table.
 *
 * @module
 */

import { toRefusal } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { activityTools } from "./activity.ts";
import { annotations, jsonSchema, type ToolContext, type ToolDef } from "./def.ts";

export type { ToolContext } from "./def.ts";
import { execTools } from "./exec.ts";
import { instanceTools } from "./instances.ts";
import { taskTools } from "./tasks.ts";
import { ProtocolFault } from "./fault.ts";

export { ProtocolFault } from "./fault.ts";

/** All tools, in the order tools/list shows them. */
const TOOLS: readonly ToolDef[] = [
  ...instanceTools,
  ...execTools,
  ...taskTools,
  ...activityTools,
];

const BY_NAME = new Map(TOOLS.map((t) => [t.name, t]));

/** The tools' names, in the order tools/list shows them. */
export function toolNames(): string[] {
  return TOOLS.map((t) => t.name);
}

/** Whether the tool named `name` runs as an MCP task when asked to. */
export function supportsTasks(name: unknown): boolean {
  return typeof name === "string" && BY_NAME.get(name)?.taskSupport === "optional";
}

let listed: Record<string, unknown>[] | undefined;

/** The `tools/list` entries (computed once). */
export function toolList(): Record<string, unknown>[] {
  listed ??= TOOLS.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: jsonSchema(t.input, "input"),
    outputSchema: jsonSchema(t.output, "output"),
    annotations: annotations(t.hints),
    execution: { taskSupport: t.taskSupport ?? "forbidden" },
  }));
  return listed;
}

/** Every tool's output schema by name: the golden file's content. */
export function outputSchemas(): Record<string, unknown> {
  return Object.fromEntries(TOOLS.map((t) => [t.name, jsonSchema(t.output, "output")]));
}

function issues(e: { issues: { path: PropertyKey[]; message: string }[] }): string {
  return e.issues.map((i) => `${i.path.map(String).join(".") || "arguments"}: ${i.message}`)
    .join("; ");
}

/** The refusal result of §1.3. */
export function refusalResult(
  code: string,
  message: string,
  args: Record<string, unknown>,
): Record<string, unknown> {
  const named: Record<string, string> = {};
  if (typeof args.instance === "string") named.instance = args.instance;
  if (typeof args.task_id === "string") named.task_id = args.task_id;
  return {
    content: [{ type: "text", text: message }],
    isError: true,
    _meta: { "dev.incusspawn/error": { code, message, ...named } },
  };
}

/** Runs one `tools/call`; throws {@link ProtocolFault} for protocol faults only. */
export async function callTool(
  name: unknown,
  rawArgs: unknown,
  ctx: ToolContext,
): Promise<Record<string, unknown>> {
  const def = typeof name === "string" ? BY_NAME.get(name) : undefined;
  if (!def) throw new ProtocolFault(-32602, `unknown tool: ${JSON.stringify(name)}`);
  if (
    rawArgs !== undefined &&
    (typeof rawArgs !== "object" || rawArgs === null || Array.isArray(rawArgs))
  ) {
    throw new ProtocolFault(-32602, `tool "${def.name}": "arguments" must be an object`);
  }
  const args = (rawArgs ?? {}) as Record<string, unknown>;
  const s: Session = ctx.session;
  const t0 = s.deps.now();
  const instance = typeof args.instance === "string" ? args.instance : undefined;
  const done = (outcome: string, detail?: string) =>
    s.audit({
      tool: def.name,
      ...(instance ? { instance } : {}),
      outcome,
      ms: s.deps.now() - t0,
      ...(detail ? { detail } : {}),
    });
  if (!s.deps.initialized()) {
    const msg = "isx is not initialised on this host: ask the user to run isx init";
    done("failed: refused");
    return refusalResult("refused", msg, args);
  }
  const parsed = def.input.safeParse(args);
  if (!parsed.success) {
    const msg = `${def.name}: invalid arguments: ${issues(parsed.error)}`;
    done("failed: invalid_argument", msg);
    return refusalResult("invalid_argument", msg, args);
  }
  try {
    const out = await def.run(parsed.data as Record<string, unknown>, ctx);
    const text = (out.text ?? JSON.stringify(out.structured, null, 2)) +
      (out.note ? `\n\n${out.note}` : "");
    done(out.audit ?? "ok");
    return {
      content: [{ type: "text", text }],
      isError: false,
      structuredContent: out.structured,
    };
  } catch (e) {
    const r = toRefusal(e);
    done(`failed: ${r.code}`, r.message);
    return refusalResult(r.code, r.message, args);
  }
}
