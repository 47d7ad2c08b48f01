/**
 * What `tools/list` answers, read from `catalog.json`: every tool's name, description, JSON
 * Schemas, annotations and task support, generated from the zod definitions of the tool
 * modules. `isx mcp` answers `initialize` and `tools/list` before it loads those modules (and
 * zod, the session, the templates): building the schemas and converting them to JSON Schema
 * at every start cost more than the protocol itself (issue 11, start-up). `catalog_test.ts`
 * fails when the file and the definitions differ; regenerate it with
 * `deno run -A tests/helpers/tool_catalog.ts`.
 *
 * @module
 */

import CATALOG from "./catalog.json" with { type: "json" };

/** One `tools/list` entry. */
export interface CatalogEntry {
  /** The tool name. */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** JSON Schema 2020-12 of the arguments. */
  inputSchema: Record<string, unknown>;
  /** JSON Schema 2020-12 of `structuredContent`. */
  outputSchema: Record<string, unknown>;
  /** §1.5 annotations. */
  annotations: Record<string, boolean>;
  /** MCP task support. */
  execution: { taskSupport: string };
}

const ENTRIES = CATALOG as unknown as CatalogEntry[];
const TASKS = new Set(
  ENTRIES.filter((t) => t.execution.taskSupport === "optional").map((t) => t.name),
);

/** The `tools/list` entries, in the order the list shows them. */
export function catalogTools(): CatalogEntry[] {
  return ENTRIES;
}

/** Whether the tool named `name` runs as an MCP task when asked to. */
export function catalogSupportsTasks(name: unknown): boolean {
  return typeof name === "string" && TASKS.has(name);
}
