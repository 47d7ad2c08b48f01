import assert from "node:assert/strict";
import { builtinDefinitions, type Definitions, parseYamlText } from "./load.ts";
import { buildOrder, resolveChain, templateChain } from "./resolve.ts";
import { parseTemplate, parseTool } from "./schema.ts";
import { refusal } from "./_fixtures.ts";

/** Built-ins plus extra definitions given as YAML text, as if from the user layer. */
function defs(
  extra: { templates?: Record<string, string>; tools?: Record<string, string> },
): Definitions {
  const d = builtinDefinitions();
  for (const [name, text] of Object.entries(extra.tools ?? {})) {
    const file = `/u/tools/${name}.yaml`;
    const def = parseTool(file, parseYamlText(file, text), name);
    d.tools.set(def.name, { def, file, layer: "user", trusted: true, files: [] });
  }
  for (const [name, text] of Object.entries(extra.templates ?? {})) {
    const file = `/u/templates/${name}.yaml`;
    const def = parseTemplate(file, parseYamlText(file, text), name);
    d.templates.set(def.name, { def, file, layer: "user", trusted: true, files: [] });
  }
  return d;
}

Deno.test("resolveChain of tpl-agents installs node once, in tpl-dev", () => {
  const chain = resolveChain(builtinDefinitions(), "tpl-agents");
  assert.deepEqual(chain.map((l) => l.template.def.name), ["tpl-minimal", "tpl-dev", "tpl-agents"]);
  assert.deepEqual(chain[0]!.tools.map((u) => u.tool.def.name), ["isx"]);
  assert.deepEqual(chain[1]!.tools.map((u) => u.tool.def.name), ["git", "node"]);
  assert.deepEqual(chain[2]!.tools.map((u) => u.tool.def.name), [
    "claude",
    "codex",
    "pi",
    "opencode",
  ]);
  assert.deepEqual(chain[2]!.allTools, ["isx", "git", "node", "claude", "codex", "pi", "opencode"]);
});

Deno.test("resolveChain resolves requires transitively, dependencies first", () => {
  const d = defs({
    tools: { a: "requires: [b]", b: "requires: [c]", c: "packages: [jq]" },
    templates: { t: "image: debian-base\ntools: [a]" },
  });
  assert.deepEqual(resolveChain(d, "t")[0]!.tools.map((u) => u.tool.def.name), ["c", "b", "a"]);
});

Deno.test("resolveChain refuses a cycle in tools' requires, naming it", () => {
  const d = defs({
    tools: { a: "requires: [b]", b: "requires: [a]" },
    templates: { t: "image: debian-base\ntools: [a]" },
  });
  const m = refusal(() => resolveChain(d, "t"));
  assert.match(m, /tool file "\/u\/tools\/b\.yaml": field "requires\[0\]": cycle a → b → a/);
});

Deno.test("resolveChain refuses an unknown tool, naming the file and field", () => {
  const d = defs({ templates: { t: "image: debian-base\ntools: [git, nope]" } });
  assert.match(
    refusal(() => resolveChain(d, "t")),
    /template file "\/u\/templates\/t\.yaml": field "tools\[1\]": unknown tool "nope" \(known: .*claude/,
  );
});

Deno.test("resolveChain refuses a missing parent, naming the file and field", () => {
  const d = defs({ templates: { t: "parent: tpl-nowhere" } });
  assert.match(
    refusal(() => resolveChain(d, "t")),
    /template file "\/u\/templates\/t\.yaml": field "parent": no template named "tpl-nowhere"/,
  );
});

Deno.test("templateChain refuses a cycle of parents", () => {
  const d = defs({ templates: { a: "parent: b", b: "parent: a" } });
  assert.match(refusal(() => templateChain(d, "a")), /field "parent": cycle a → b → a/);
});

Deno.test("templateChain refuses a root without image and an unknown template", () => {
  const d = defs({ templates: { t: "description: no image" } });
  assert.match(refusal(() => templateChain(d, "t")), /field "image": required on a root template/);
  assert.match(refusal(() => templateChain(d, "zzz")), /unknown template "zzz"/);
});

Deno.test("resolveChain refuses a parameter the tool does not take", () => {
  const d = defs({ templates: { t: "parent: tpl-dev\ntools: [{name: claude, modle: x}]" } });
  assert.match(
    refusal(() => resolveChain(d, "t")),
    /field "tools\[0\]\.modle": tool "claude" takes model/,
  );
});

Deno.test("resolveChain applies parameter defaults and template values", () => {
  const d = defs({ templates: { t: "parent: tpl-dev\ntools: [{name: pi, model: m-2}]" } });
  const pi = resolveChain(d, "t").at(-1)!.tools.find((u) => u.tool.def.name === "pi")!;
  assert.deepEqual(pi.params, { provider: "anthropic", model: "m-2" });
});

Deno.test("definition hash ignores description, network and limits but not what is built", () => {
  const base = "image: debian-base\npackages: [jq]\n";
  const h = (t: string) => resolveChain(defs({ templates: { t } }), "t")[0]!.hash;
  const a = h(base);
  assert.equal(h(base + "description: other\nnetwork: airgap\nlimits: {cpu: 2}\n"), a);
  assert.notEqual(h("image: debian-base\npackages: [jq, git]\n"), a);
  assert.notEqual(h(base + "run: echo x\n"), a);
});

Deno.test("a parent's change changes every child's hash", () => {
  const child = "parent: p\nrun: echo c\n";
  const h = (p: string) => resolveChain(defs({ templates: { p, c: child } }), "c")[1]!.hash;
  assert.notEqual(h("image: debian-base\n"), h("image: debian-base\nrun: echo p\n"));
});

Deno.test("buildOrder lists parents before children, once", () => {
  const d = defs({ templates: { a: "image: debian-base", b: "parent: a", c: "parent: b" } });
  assert.deepEqual(buildOrder(d, ["c", "b"]), ["a", "b", "c"]);
});
