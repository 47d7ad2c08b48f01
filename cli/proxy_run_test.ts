import assert from "node:assert/strict";
import type { CliContext } from "./command.ts";
import { mayHaveTools, toolRules } from "./proxy_run.ts";
import type { Secret } from "../proxy/mod.ts";

async function withDirs(fn: (cfg: string, search: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "isx-proxy-run-" });
  try {
    await Deno.mkdir(`${dir}/cfg`);
    await Deno.mkdir(`${dir}/search/tools`, { recursive: true });
    await fn(`${dir}/cfg`, `${dir}/search`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const ctxOf = (configDir: string) =>
  ({ perm: { configDir, home: "/nonexistent" } }) as unknown as CliContext;
const TOOL = 'configuration: { t: TOKEN-1 }\nproxy:\n  - { domain: api.svc.dev, bearer: "${t}" }\n';

Deno.test("mayHaveTools: only tool YAML in tools/ or search paths in config.yaml load the tools reader", async () => {
  await withDirs(async (cfg, search) => {
    assert.equal(mayHaveTools(cfg), false); // nothing at all
    await Deno.writeTextFile(`${cfg}/config.yaml`, "templates:\n  searchPaths: []\nproxy: {}\n");
    await Deno.mkdir(`${cfg}/tools`);
    await Deno.writeTextFile(`${cfg}/tools/README.md`, "not a tool");
    assert.equal(mayHaveTools(cfg), false);
    assert.deepEqual(await toolRules(ctxOf(cfg)), []);
    await Deno.writeTextFile(`${cfg}/config.yaml`, `templates:\n  searchPaths: [${search}]\n`);
    assert.equal(mayHaveTools(cfg), true);
    await Deno.writeTextFile(`${cfg}/config.yaml`, "templates: &t\n  searchPaths: []\n");
    assert.equal(mayHaveTools(cfg), false); // an anchor is YAML like any other (js-yaml)
    await Deno.writeTextFile(`${cfg}/config.yaml`, "templates: {searchPaths: [x\n");
    assert.equal(mayHaveTools(cfg), true); // not readable here: the full reader says why
    await Deno.writeTextFile(`${cfg}/config.yaml`, "");
    await Deno.writeTextFile(`${cfg}/tools/svc.yml`, TOOL);
    assert.equal(mayHaveTools(cfg), true);
  });
});

Deno.test("toolRules reads the user's and the search paths' tools, values wrapped as secrets", async () => {
  await withDirs(async (cfg, search) => {
    await Deno.mkdir(`${cfg}/tools`);
    await Deno.writeTextFile(`${cfg}/tools/svc.yaml`, TOOL);
    await Deno.writeTextFile(`${search}/tools/other.yaml`, TOOL.replace("api.svc", "x.other"));
    await Deno.writeTextFile(`${cfg}/config.yaml`, `templates:\n  searchPaths: [${search}]\n`);
    const rules = await toolRules(ctxOf(cfg));
    assert.deepEqual(rules.map((r) => [r.domain, r.kind]), [
      ["api.svc.dev", "bearer"],
      ["x.other.dev", "bearer"],
    ]);
    assert.equal((rules[0]!.value as Secret).reveal(), "TOKEN-1");
    assert.ok(!JSON.stringify(rules).includes("TOKEN-1"));
  });
});
