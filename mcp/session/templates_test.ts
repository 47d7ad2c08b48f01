import assert from "node:assert/strict";
import { builtinDefinitions, type Definitions, parseYamlText } from "../templates/load.ts";
import { parseTemplate } from "../templates/schema.ts";
import { resolveChain } from "../templates/resolve.ts";
import { approvedTemplate, summaryAgentOf } from "./templates.ts";
import { MCP_DEFAULTS } from "./config.ts";

/** Built-ins plus user templates given as YAML text. */
function defs(templates: Record<string, string>): Definitions {
  const d = builtinDefinitions();
  for (const [name, text] of Object.entries(templates)) {
    const file = `/u/templates/${name}.yaml`;
    const def = parseTemplate(file, parseYamlText(file, text), name);
    d.templates.set(def.name, { def, file, layer: "user", trusted: true, files: [] });
  }
  return d;
}

const ALL = ["claude", "codex", "pi", "opencode"];

Deno.test("summaryAgentOf defaults to the default delegate agent, Claude with haiku", () => {
  assert.deepEqual(summaryAgentOf(undefined, ALL), {
    summary_agent: { agent: "claude", model: "haiku" },
  });
  assert.deepEqual(summaryAgentOf(undefined, ["opencode", "pi"]), {
    summary_agent: { agent: "pi" },
  });
  assert.deepEqual(summaryAgentOf("codex", ALL), { summary_agent: { agent: "codex" } });
  assert.deepEqual(summaryAgentOf({ agent: "claude", model: "claude-sonnet-4-6" }, ALL), {
    summary_agent: { agent: "claude", model: "claude-sonnet-4-6" },
  });
  assert.deepEqual(summaryAgentOf(undefined, []), {
    summary_problem: "it installs none of claude, codex, pi, opencode",
  });
  assert.deepEqual(summaryAgentOf("codex", ["pi"]), {
    summary_problem: "its summary_agent codex is not installed (installed: pi)",
  });
});

Deno.test("approvedTemplate takes summary_agent from the nearest layer, outside the build hash", () => {
  const d = defs({
    "t-codex": "parent: tpl-agents\nsummary_agent: codex",
    "t-child": "parent: t-codex",
    "t-model": "parent: t-codex\nsummary_agent: {agent: pi, model: claude-haiku-4-5}",
    "t-none": "parent: tpl-dev",
    "t-missing": "parent: tpl-dev\nsummary_agent: claude",
  });
  const cfg = { ...MCP_DEFAULTS, templates: [...d.templates.keys()], source: "/x/mcp.yaml" };
  const facts = (n: string) => approvedTemplate(cfg, d, n);
  assert.deepEqual(facts("tpl-agents").summary_agent, { agent: "claude", model: "haiku" });
  assert.deepEqual(facts("t-codex").summary_agent, { agent: "codex" });
  assert.deepEqual(facts("t-child").summary_agent, { agent: "codex" }, "inherited");
  assert.deepEqual(facts("t-model").summary_agent, { agent: "pi", model: "claude-haiku-4-5" });
  assert.equal(facts("t-none").summary_agent, undefined);
  assert.match(facts("t-missing").summary_problem!, /summary_agent claude is not installed/);
  // naming a summary agent does not make a built template stale
  const plain = defs({ "t-x": "parent: tpl-agents" });
  const named = defs({ "t-x": "parent: tpl-agents\nsummary_agent: pi" });
  assert.equal(resolveChain(plain, "t-x").at(-1)!.hash, resolveChain(named, "t-x").at(-1)!.hash);
});

Deno.test("a template's summary_agent must name an agent and a model of the agents' pattern", () => {
  for (const bad of ["summary_agent: bob", "summary_agent: {agent: claude, model: '-x'}"]) {
    assert.throws(
      () => parseTemplate("/u/t.yaml", parseYamlText("/u/t.yaml", `parent: tpl-dev\n${bad}`), "t"),
      /field "summary_agent/,
    );
  }
});
