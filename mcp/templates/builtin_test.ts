/**
 * The built-in tools and templates are valid definitions, and what a start makes of them without
 * the schema (`builtinDef`, load.ts) is what the schema makes of them: the check every start
 * used to run, run here on every change instead.
 */

import * as assert from "node:assert/strict";
import { IsbError } from "../../rpc/errors.ts";
import { BUILTIN_TEMPLATES, BUILTIN_TOOLS } from "./builtin.ts";
import { builtinDefinitions, parseYamlText } from "./load.ts";
import { builtinDef, parseTemplate, parseTool, type ToolDef } from "./schema.ts";

Deno.test("every built-in passes the schema, and a start's definition is the schema's", () => {
  const defs = builtinDefinitions();
  assert.deepEqual([...defs.tools.keys()], Object.keys(BUILTIN_TOOLS));
  assert.deepEqual([...defs.templates.keys()], Object.keys(BUILTIN_TEMPLATES));
  for (const [name, text] of Object.entries(BUILTIN_TOOLS)) {
    const file = `builtin:tools/${name}.yaml`;
    assert.deepEqual(defs.tools.get(name)!.def, parseTool(file, parseYamlText(file, text), name));
  }
  for (const [name, text] of Object.entries(BUILTIN_TEMPLATES)) {
    const file = `builtin:templates/${name}.yaml`;
    const parsed = parseTemplate(file, parseYamlText(file, text), name);
    assert.deepEqual(defs.templates.get(name)!.def, parsed);
  }
});

Deno.test("a built-in the schema refuses is caught here (what the check above relies on)", () => {
  const file = "builtin:tools/bad.yaml";
  const raw = parseYamlText(file, "description: x\npackages: nope\nunknown_field: 1\n");
  assert.throws(() => parseTool(file, raw, "bad"), (e: unknown) => e instanceof IsbError);
  // the start's path takes it as it is: only the test above stands between a bad built-in and use
  assert.equal(builtinDef<ToolDef>(raw, "bad").name, "bad");
});
