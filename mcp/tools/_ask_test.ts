import assert from "node:assert/strict";
import { RefusalError } from "../errors.ts";
import type { Session } from "../session/mod.ts";
import { MCP_DEFAULTS } from "../session/config.ts";
import { builtinDefinitions } from "../templates/load.ts";
import { prepareAsk } from "./_ask.ts";

/** The part of a session prepareAsk reads: held instances, the config, the definitions. */
function session(held: Record<string, string>): Session {
  const defs = builtinDefinitions();
  const cfg = { ...MCP_DEFAULTS, templates: [...defs.templates.keys()], source: "/x/mcp.yaml" };
  return {
    held: new Map(Object.entries(held).map(([name, template]) => [name, { name, template }])),
    deps: { readConfig: () => cfg, definitions: () => defs },
  } as unknown as Session;
}

function refused(fn: () => unknown): RefusalError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof RefusalError, String(e));
    return e;
  }
  throw new assert.AssertionError({ message: "expected a refusal" });
}

Deno.test("prepareAsk names the template's summary agent before anything runs", () => {
  const s = session({ "mcp-agents-a": "tpl-agents", "mcp-dev-b": "tpl-dev" });
  const ok = prepareAsk(s, { tool: "exec", instance: "mcp-agents-a", question: "why?" });
  assert.deepEqual(ok.who, { agent: "claude", model: "haiku" });
  const none = refused(() =>
    prepareAsk(s, { tool: "exec", instance: "mcp-dev-b", question: "why?" })
  );
  assert.equal(none.code, "invalid_argument");
  assert.match(
    none.message,
    /^exec: ask needs a summary agent, and template "tpl-dev" has none \(it installs none of claude, codex, pi, opencode\); leave ask out and read the output/,
  );
});

Deno.test("prepareAsk refuses a question over 2000 characters, an empty one, an instance not held", () => {
  const s = session({ "mcp-agents-a": "tpl-agents" });
  for (const question of ["q".repeat(2001), " "]) {
    const e = refused(() =>
      prepareAsk(s, { tool: "get_diff", instance: "mcp-agents-a", question })
    );
    assert.equal(e.code, "invalid_argument");
    assert.match(e.message, /^get_diff: ask: the question/);
  }
  const e = refused(() => prepareAsk(s, { tool: "exec", instance: "nope", question: "q" }));
  assert.equal(e.code, "not_found");
});
