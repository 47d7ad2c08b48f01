import assert from "node:assert/strict";
import { parseTemplate, parseTool } from "./schema.ts";
import { refusal } from "./_fixtures.ts";

const F = "/cfg/templates/t.yaml";

Deno.test("parseTemplate accepts every documented field", () => {
  const t = parseTemplate(F, {
    name: "tpl-x",
    description: "d",
    parent: "tpl-dev",
    type: "container",
    packages: ["git", "libfoo-dev=1.2"],
    tools: ["git", { name: "claude", model: "opus" }],
    run: "echo a",
    run_as_user: ["echo b", "echo c"],
    files: [{ path: "/etc/x", content: "x", mode: "0600", owner: "agentuser" }],
    env: { FOO: "bar", N: 1 },
    workdir: "/home/agentuser/src",
    repos: [{ url: "https://github.com/a/b", path: "/home/agentuser/b", branch: "main" }],
    agent_note: "note",
    network: "proxy-only",
    limits: { cpu: 2, memory: "4GiB", processes: 500 },
  }, "t");
  assert.equal(t.name, "tpl-x");
  assert.equal(t.tools?.length, 2);
});

Deno.test("parseTemplate takes the name from the file stem when absent", () => {
  assert.equal(parseTemplate(F, { image: "debian-base" }, "tpl-stem").name, "tpl-stem");
});

Deno.test("parseTemplate refuses an unknown field naming the file, the field and what is allowed", () => {
  const m = refusal(() => parseTemplate(F, { image: "x", pakages: ["git"] }, "t"));
  assert.match(m, /template file "\/cfg\/templates\/t\.yaml"/);
  assert.match(m, /unknown field "pakages"/);
  assert.match(m, /allowed: name, description, parent, image, type, packages/);
});

Deno.test("parseTemplate refuses a nested unknown field with its path", () => {
  const m = refusal(() =>
    parseTemplate(F, { image: "x", repos: [{ url: "u", path: "/p", rev: "x" }] }, "t")
  );
  assert.match(m, /unknown field "repos\[0\]\.rev" \(allowed: url, path, branch\)/);
});

Deno.test("parseTemplate names the allowed values of an enum", () => {
  const m = refusal(() => parseTemplate(F, { image: "x", network: "none" }, "t"));
  assert.match(m, /field "network": expected one of "full", "proxy-only", "airgap"/);
});

Deno.test("parseTemplate refuses a mode written as a YAML number", () => {
  const m = refusal(() =>
    parseTemplate(F, { image: "x", files: [{ path: "/a", content: "", mode: 644 }] }, "t")
  );
  assert.match(m, /field "files\[0\]\.mode"/);
});

Deno.test("parseTemplate refuses a file with both content and source", () => {
  const m = refusal(() =>
    parseTemplate(F, { image: "x", files: [{ path: "/a", content: "", source: "s" }] }, "t")
  );
  assert.match(m, /exactly one of content or source/);
});

Deno.test("parseTemplate refuses image on a template with a parent", () => {
  const m = refusal(() => parseTemplate(F, { parent: "tpl-a", image: "b" }, "t"));
  assert.match(m, /field "image": only a root template/);
});

Deno.test("parseTemplate refuses a bad name and a non-mapping document", () => {
  assert.match(refusal(() => parseTemplate(F, { image: "x" }, "Bad_Name")), /field "name"/);
  assert.match(refusal(() => parseTemplate(F, ["a"], "t")), /expected a YAML mapping/);
});

Deno.test("parseTool accepts npm, params and requires", () => {
  const t = parseTool("/t/tools/x.yaml", {
    requires: ["node"],
    params: { model: { default: "m-1" } },
    npm: [{ package: "@scope/pkg", version: "^1.2.0", install: true }],
  }, "x");
  assert.equal(t.name, "x");
  assert.ok(t.npm?.[0]?.install);
});

Deno.test("parseTool refuses a shell-unsafe package name", () => {
  assert.match(
    refusal(() => parseTool("/t/x.yaml", { packages: ["git; rm -rf /"] }, "x")),
    /Debian package name/,
  );
});
