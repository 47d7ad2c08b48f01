import assert from "node:assert/strict";
import { builtinDefinitions, parseYamlText } from "./load.ts";
import { resolveChain } from "./resolve.ts";
import { parseTemplate } from "./schema.ts";
import { buildCredentials } from "./build.ts";

function chainOf(yaml: string, trusted: boolean) {
  const d = builtinDefinitions();
  const file = "/p/templates/t.yaml";
  const def = parseTemplate(file, parseYamlText(file, yaml), "t");
  d.templates.set("t", {
    def,
    file,
    layer: trusted ? "user" : "project",
    trusted,
    files: [],
  });
  return resolveChain(d, "t");
}

Deno.test("buildCredentials declares github only for a trusted chain that clones repos", () => {
  const repos = "parent: tpl-minimal\nrepos: [{ url: 'https://github.com/o/r', path: /w/r }]\n";
  assert.equal(buildCredentials(chainOf(repos, true)), "github");
  assert.equal(buildCredentials(chainOf(repos, false)), "");
  assert.equal(buildCredentials(chainOf("parent: tpl-minimal\n", true)), "");
});
