import assert from "node:assert/strict";
import { IsbError } from "../../rpc/mod.ts";
import { loadDefinitions } from "./load.ts";
import { loadToolProxyRules, toolProxyRules } from "./proxy_rules.ts";
import { parseTemplate, parseTool } from "./schema.ts";
import { accountsOf } from "./steps.ts";
import type { Chain } from "./resolve.ts";

const F = "/cfg/tools/svc.yaml";

Deno.test("toolProxyRules substitutes ${key} from the tool's configuration in every rule kind", () => {
  const def = parseTool(F, {
    configuration: { token: "T0K", pw: "P4SS" },
    proxy: [
      { domain: "api.svc.dev", bearer: "${token}" },
      { domain: "*.svc.dev", header: "X-Key", value: "k-${token}-${token}" },
      { domain: "git.svc.dev", basic: { user: "bot", password: "${pw}" } },
      { domain: "lit.svc.dev", bearer: "literal" },
    ],
  }, "svc");
  assert.deepEqual(toolProxyRules([{ def, file: F }]), [
    { tool: "svc", domain: "api.svc.dev", kind: "bearer", value: "T0K" },
    { tool: "svc", domain: "*.svc.dev", kind: "header", header: "X-Key", value: "k-T0K-T0K" },
    { tool: "svc", domain: "git.svc.dev", kind: "basic", user: "bot", value: "P4SS" },
    { tool: "svc", domain: "lit.svc.dev", kind: "bearer", value: "literal" },
  ]);
});

Deno.test("toolProxyRules refuses a ${key} the configuration lacks, naming the field", () => {
  const def = parseTool(F, {
    configuration: { token: "SECRET-T" },
    proxy: [{ domain: "api.svc.dev", bearer: "${tokne}" }],
  }, "svc");
  assert.throws(() => toolProxyRules([{ def, file: F }]), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "invalid");
    assert.ok(e.message.includes('field "proxy[0].bearer": ${tokne}'), e.message);
    assert.ok(!e.message.includes("SECRET-T"));
    return true;
  });
});

Deno.test("parseTool refuses proxy rules that could smuggle headers or hijack routing", () => {
  const CASES: [object, string][] = [
    [{ domain: "api.svc.dev", bearer: "a\r\nX-Evil: 1" }, "proxy[0].bearer"],
    [{ domain: "api.svc.dev", header: "Host", value: "x" }, "proxy[0].header"],
    [{ domain: "api.svc.dev", header: "Transfer-Encoding", value: "x" }, "proxy[0].header"],
    [{ domain: "api.svc.dev", header: "X Bad", value: "x" }, "proxy[0].header"],
    [{ domain: "localhost", bearer: "x" }, "proxy[0].domain"],
    [{ domain: "*", bearer: "x" }, "proxy[0].domain"],
    [{ domain: "API.svc.dev", bearer: "x" }, "proxy[0].domain"],
    [{ domain: "api.svc.dev", basic: { user: "a:b", password: "x" } }, "proxy[0].basic.user"],
    [{ domain: "api.svc.dev", bearer: "" }, "proxy[0].bearer"],
    [{ domain: "api.svc.dev", bearer: "x", header: "X-A", value: "y" }, "proxy[0]"],
  ];
  for (const [rule, field] of CASES) {
    assert.throws(
      () => parseTool(F, { proxy: [rule] }, "svc"),
      (e: unknown) => e instanceof IsbError && e.message.includes(field),
      JSON.stringify(rule),
    );
  }
});

Deno.test("template accounts: validated, merged down the chain and keyed as the proxy stamps them", () => {
  const T = "/cfg/templates/t.yaml";
  const parent = parseTemplate(T, { image: "x", accounts: { claude: "work", github: "me" } }, "p");
  const child = parseTemplate(T, { parent: "p", accounts: { anthropic: "sub", codex: "o" } }, "c");
  const chain = [parent, child].map((def) => ({
    template: { def },
    tools: [],
  })) as unknown as Chain;
  assert.deepEqual(accountsOf(chain), { claude: "sub", github: "me", openai: "o" });
  for (const accounts of [{ aws: "x" }, { claude: "a b" }, { claude: "../x" }, { claude: "" }]) {
    assert.throws(() => parseTemplate(T, { image: "x", accounts }, "t"), IsbError);
  }
});

Deno.test("loadToolProxyRules reads user and search-path tools only; a project tool with proxy: is refused", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const tool = (token: string) =>
      `configuration: { t: ${token} }\nproxy:\n  - { domain: api.svc.dev, bearer: "\${t}" }\n`;
    for (const d of ["user", "search", "proj/.isx"]) {
      await Deno.mkdir(`${dir}/${d}/tools`, { recursive: true });
    }
    await Deno.writeTextFile(`${dir}/user/tools/svc.yaml`, tool("FROM-USER"));
    await Deno.writeTextFile(`${dir}/search/tools/svc.yaml`, tool("FROM-SEARCH"));
    await Deno.writeTextFile(`${dir}/proj/.isx/tools/svc.yaml`, tool("FROM-PROJECT"));
    const rules = loadToolProxyRules({
      configDir: `${dir}/user`,
      searchPaths: [`${dir}/search`],
    });
    assert.deepEqual(rules.map((r) => r.value), ["FROM-SEARCH"]);
    assert.deepEqual(loadToolProxyRules({ configDir: `${dir}/user` }).map((r) => r.value), [
      "FROM-USER",
    ]);
    assert.throws(
      () => loadDefinitions({ configDir: `${dir}/user`, cwd: `${dir}/proj` }),
      (e: unknown) =>
        e instanceof IsbError && e.code === "invalid" &&
        e.message.includes("never from a project's .isx/") && !e.message.includes("FROM-PROJECT"),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("loadToolProxyRules skips a bad layer whole when asked, keeping the others", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${dir}/user/tools`, { recursive: true });
    await Deno.mkdir(`${dir}/bad/tools`, { recursive: true });
    await Deno.writeTextFile(
      `${dir}/user/tools/a.yaml`,
      'configuration: { t: OK }\nproxy:\n  - { domain: a.svc.dev, bearer: "${t}" }\n',
    );
    await Deno.writeTextFile(
      `${dir}/bad/tools/b.yaml`,
      'proxy:\n  - { domain: b.svc.dev, bearer: "${missing}" }\n',
    );
    const skipped: string[] = [];
    const rules = loadToolProxyRules(
      { configDir: `${dir}/user`, searchPaths: [`${dir}/bad`, `${dir}/absent`] },
      (d) => skipped.push(d),
    );
    assert.deepEqual(rules.map((r) => r.domain), ["a.svc.dev"]);
    assert.deepEqual(skipped, [`${dir}/bad`]);
    assert.throws(() =>
      loadToolProxyRules({ configDir: `${dir}/user`, searchPaths: [`${dir}/bad`] })
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("loadToolProxyRules takes a command value from the user's own tools only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const tool = (name: string) =>
      `proxy:\n  - { domain: ${name}.svc.dev, bearer: { command: [gh, auth, token], ttl: 55m } }\n`;
    for (const d of ["user", "search"]) await Deno.mkdir(`${dir}/${d}/tools`, { recursive: true });
    await Deno.writeTextFile(`${dir}/user/tools/mine.yaml`, tool("mine"));
    assert.deepEqual(loadToolProxyRules({ configDir: `${dir}/user` }).map((r) => r.value), [
      { command: ["gh", "auth", "token"], ttlMs: 55 * 60_000 },
    ]);
    await Deno.writeTextFile(`${dir}/search/tools/theirs.yaml`, tool("theirs"));
    const skipped: string[] = [];
    const rules = loadToolProxyRules(
      { configDir: `${dir}/user`, searchPaths: [`${dir}/search`] },
      (_, e) => skipped.push(e.message),
    );
    assert.deepEqual(rules.map((r) => r.domain), ["mine.svc.dev"]);
    assert.equal(skipped.length, 1);
    assert.ok(skipped[0]!.includes("a command is allowed only in ~/.config/isx/tools"), skipped[0]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
