/**
 * Writes `mcp/tools/catalog.json` (what `isx mcp` answers to `tools/list` without loading
 * the tool modules) from the tool definitions: run it after changing a tool's name,
 * description, schemas, annotations or task support. `mcp/tools/catalog_test.ts` fails
 * until it is run. `deno run -A tests/helpers/tool_catalog.ts`
 *
 * @module
 */

import { toolList } from "../../mcp/tools/mod.ts";

/** Where the catalog lives. */
export const CATALOG_PATH = new URL("../../mcp/tools/catalog.json", import.meta.url);

/** The catalog's text for the current definitions. */
export function catalogText(): string {
  return JSON.stringify(toolList(), null, 2) + "\n";
}

if (import.meta.main) Deno.writeTextFileSync(CATALOG_PATH, catalogText());
