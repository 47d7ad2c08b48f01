import assert from "node:assert/strict";
import { CATALOG_PATH, catalogText } from "../../tests/helpers/tool_catalog.ts";
import { catalogSupportsTasks, catalogTools } from "./catalog.ts";
import { supportsTasks, toolList } from "./mod.ts";

Deno.test("catalog.json is what the tool definitions generate", () => {
  assert.equal(
    Deno.readTextFileSync(CATALOG_PATH),
    catalogText(),
    "mcp/tools/catalog.json is stale: run deno run -A tests/helpers/tool_catalog.ts",
  );
  assert.deepEqual(catalogTools(), toolList());
});

Deno.test("catalogSupportsTasks answers as the definitions do, for every tool and junk", () => {
  const names: unknown[] = [...toolList().map((t) => t.name), "nope", 1, undefined, null];
  for (const n of names) assert.equal(catalogSupportsTasks(n), supportsTasks(n), String(n));
  assert.ok(toolList().some((t) => supportsTasks(t.name))); // both answers occur
});
