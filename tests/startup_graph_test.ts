/**
 * What each mode loads at start-up, read off the module graph Deno itself builds
 * (`deno info --json`): everything in main.ts's graph (Deno reads it all before the program
 * starts, statically analyzable dynamic imports included), plus the command module's static
 * graph. The dispatch table (cli/commands.ts) imports a command by a computed specifier, so a
 * command's module counts only for its own command. Spawn cost is paid per SDK client
 * (`isb rpc`) and per agent session (`isx mcp`), and every module costs start-up time.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).href;
interface Dep {
  code?: { specifier?: string };
  isDynamic?: boolean;
}
interface Graph {
  modules: { specifier: string; dependencies?: Dep[] }[];
  redirects: Record<string, string>;
}

/** Deno's own module graph of one root: what `deno run` reads before the program starts. */
async function graphOf(root: string): Promise<Graph> {
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", root],
    cwd: new URL("..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!info.success) throw new Error(`deno info --json ${root} failed`);
  return JSON.parse(new TextDecoder().decode(info.stdout));
}

/**
 * Every module of a root's graph that Deno reads before the program starts: code imports,
 * static and statically analyzable dynamic ones (type-only imports are not loaded).
 */
function all(g: Graph, root: string): string[] {
  return closure(g, root, true);
}

/** Repo-relative paths and npm package specifiers a root loads through static imports. */
function staticOf(g: Graph, root: string): string[] {
  return closure(g, root, false);
}

function closure(g: Graph, root: string, dynamic: boolean): string[] {
  const modules = new Map(g.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const stack = [ROOT + root];
  while (stack.length) {
    const s0 = stack.pop()!;
    const s = g.redirects[s0] ?? s0;
    if (seen.has(s)) continue;
    seen.add(s);
    for (const d of modules.get(s)?.dependencies ?? []) {
      if (d.code?.specifier && (dynamic || !d.isDynamic)) stack.push(d.code.specifier);
    }
  }
  return [...seen].map((s) => (s.startsWith(ROOT) ? s.slice(ROOT.length) : s)).sort();
}

const MAIN = all(await graphOf("main.ts"), "main.ts");

/** What running one command loads: main.ts's graph and the command module's static graph. */
async function loads(module: string): Promise<string[]> {
  return [...new Set([...MAIN, ...staticOf(await graphOf(module), module)])].sort();
}

const COMMAND_MODULES = [
  "cli/rpc.ts",
  "cli/guest.ts",
  "cli/init.ts",
  "cli/build.ts",
  "cli/instances.ts",
  "cli/list.ts",
  "cli/shell.ts",
  "cli/proxy.ts",
  "cli/mcp.ts",
];
const under = (xs: string[], ...prefixes: string[]) =>
  xs.filter((x) => prefixes.some((p) => x.startsWith(p)));

Deno.test("main.ts alone (isx --help, --version, mistakes) loads no command, engine or npm package", () => {
  // the whole graph Deno reads at start, dynamic imports included: no command is prefetched
  const got = MAIN;
  assert.deepEqual(under(got, ...COMMAND_MODULES), []);
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "rpc/incus/", "mcp/", "proxy/"), []);
  assert.deepEqual(under(got, "npm:", "rpc/vendor/"), []);
  // nor Deno's Node layer: the flags are parsed by cli/argv.ts, not node:util (~8 ms)
  assert.deepEqual(under(got, "node:"), []);
});

Deno.test("isb rpc loads neither the proxy, the MCP layer, the templates nor the guest", async () => {
  const got = await loads("cli/rpc.ts");
  assert.deepEqual(under(got, "mcp/", "proxy/", "guest/"), []);
  assert.deepEqual(under(got, ...COMMAND_MODULES.filter((m) => m !== "cli/rpc.ts")), []);
  // the hello is written before zod and js-yaml load: the method table and the library are
  // imported after it (rpc/server/dispatch.ts names zod's types only)
  assert.deepEqual(under(got, "npm:", "rpc/vendor/"), []);
  assert.ok(got.includes("rpc/server/mod.ts")); // the graph is read right: rpc has its server
});

Deno.test("isb rpc reads neither the library nor the method table before its hello", async () => {
  // Deno reads every statically analyzable import() of the graph before the program starts;
  // cli/rpc.ts and rpc/server/mod.ts import those two by computed specifiers (issue 11)
  const got = all(await graphOf("cli/rpc.ts"), "cli/rpc.ts");
  const engine = under(got, "rpc/sandbox/", "rpc/incus/", "rpc/server/methods/", "rpc/mod.ts");
  assert.deepEqual(engine.filter((m) => m !== "rpc/sandbox/exec/registry.ts"), []);
  assert.deepEqual(under(got, "npm:", "rpc/vendor/", "mcp/", "proxy/"), []);
  assert.ok(got.includes("rpc/server/mod.ts")); // the graph is read right
});

Deno.test("isb rpc evaluates for version no zod, and for its first sandbox.list no Node module and no YAML reader", async () => {
  // what the library and the method table import statically is evaluated before the first
  // request is answered (a dynamic import is only read): the compose operations (js-yaml,
  // node:path) wait for the first compose.* call, the incus CLI's remotes (config.yml, read
  // with js-yaml, ~3 ms) are rpc/base.ts's, not rpc/mod.ts's; hashes, base64 and paths are
  // Deno's own
  // the table holds no schema: its groups load on first call, so version takes no zod and the
  // first sandbox.list takes its own group's
  const table = staticOf(await graphOf("rpc/server/methods/mod.ts"), "rpc/server/methods/mod.ts");
  assert.deepEqual(under(table, "rpc/vendor/", "rpc/server/methods/sandbox.ts"), []);
  assert.ok(table.includes("rpc/server/methods/general.ts")); // read right
  const got = [
    ...staticOf(await graphOf("rpc/mod.ts"), "rpc/mod.ts"),
    ...table,
    ...staticOf(await graphOf("rpc/server/methods/sandbox.ts"), "rpc/server/methods/sandbox.ts"),
  ];
  assert.deepEqual(under(got, "node:", "npm:/js-yaml", "npm:/@peculiar"), []);
  assert.deepEqual(under(got, "rpc/vendor/js_yaml.js", "rpc/yaml.ts", "rpc/incus/remote.ts"), []);
  assert.deepEqual(under(got, "rpc/sandbox/compose/ops.ts", "rpc/sandbox/compose/load.ts"), []);
  assert.deepEqual(under(got, "npm:"), []); // zod and js-yaml are bundled modules (scripts/vendor.ts)
  assert.ok(got.includes("rpc/vendor/zod.js"), got.join(" ")); // read right
  // the spec's schemas wait for the first method that reads a spec (sandbox_spec.ts); the
  // engine uses the spec's helpers without them, and takes no zod at all
  const schemas = ["spec.ts", "service.ts", "parts.ts", "mounts.ts", "ports.ts", "egress.ts"];
  assert.deepEqual(under(got, ...schemas.map((f) => `rpc/sandbox/spec/${f}`)), []);
  const engine = staticOf(await graphOf("rpc/mod.ts"), "rpc/mod.ts");
  assert.deepEqual(under(engine, "rpc/vendor/zod.js", "rpc/sandbox/spec/scalars.ts"), []);
});

Deno.test("isx mcp's backend evaluates no Node module", async () => {
  const got = staticOf(await graphOf("cli/mcp_backend.ts"), "cli/mcp_backend.ts");
  assert.deepEqual(under(got, "node:"), []);
  assert.ok(got.includes("rpc/host_paths.ts")); // the graph is read right
});

Deno.test("isx guest loads neither the sandbox engine, the proxy nor the MCP layer", async () => {
  const got = await loads("cli/guest.ts");
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "mcp/", "proxy/", "npm:"), []);
  assert.ok(got.includes("guest/mod.ts"));
});

Deno.test("only isb rpc loads the rpc server; no command loads another command's module", async () => {
  for (const m of COMMAND_MODULES.filter((m) => m !== "cli/rpc.ts")) {
    const got = await loads(m);
    assert.deepEqual(under(got, "rpc/server/"), [], m);
    const others = COMMAND_MODULES.filter((o) => o !== m);
    assert.deepEqual(under(got, ...others), [], m);
  }
});

Deno.test("the guest bundle (cli/bundle.ts) carries every command without the sources", async () => {
  const dir = await Deno.makeTempDir({ prefix: "isx-bundle-" });
  try {
    const root = new URL("..", import.meta.url).pathname;
    const made = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--platform=deno",
        "--config",
        `${root}deno.json`,
        "-o",
        `${dir}/isx.js`,
        `${root}cli/bundle.ts`,
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(made.success, new TextDecoder().decode(made.stderr));
    for (const cmd of ["guest", "rpc", "list", "mcp"]) {
      const run = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-config",
          "--no-lock",
          "--quiet",
          "--no-prompt",
          "-A",
          `${dir}/isx.js`,
          cmd,
          "--help",
        ],
        cwd: dir,
        env: { ISX_PROG: "isx" },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const out = new TextDecoder().decode(run.stdout);
      assert.ok(run.success, `${cmd}: ${new TextDecoder().decode(run.stderr)}`);
      assert.match(out, new RegExp(`^Usage: is[bx] .*${cmd}`), cmd);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("isx proxy run keeps resident neither the sandbox engine nor the MCP layer", async () => {
  // The proxy runs for days and keeps every module it evaluated (issue 11: footprint): the
  // static graphs of main.ts, the command, its run module and (with --remote) incus_remote.ts.
  const roots = ["main.ts", "cli/proxy.ts", "cli/proxy_run.ts", "cli/incus_remote.ts"];
  const got = (await Promise.all(roots.map(async (r) => staticOf(await graphOf(r), r)))).flat();
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "rpc/mod.ts", "mcp/mod.ts"), []);
  assert.deepEqual(under(got, "mcp/server/", "mcp/instances/", "mcp/tools/", "mcp/tasks/"), []);
  assert.deepEqual(under(got, "cli/proxy_status.ts", "cli/proxy_account.ts"), []);
  assert.deepEqual(under(got, "npm:/@modelcontextprotocol", "npm:/ajv"), []);
  // zod (~11 MiB resident): the proxy checks its config's shape with proxy/config/shape.ts;
  // the tools reader (mcp/tool_rules.ts, which has zod) is a dynamic import, made only when a
  // tool can exist (cli/proxy_run.ts). YAML is js-yaml's, pre-built (rpc/vendor/js_yaml.js,
  // < 1 MiB resident), through rpc/yaml.ts; no npm package is resolved at all
  assert.deepEqual(under(got, "npm:", "rpc/vendor/zod.js"), []);
  assert.deepEqual(under(got, "mcp/"), []);
  // the graph is read right: the proxy and its config readers are there
  assert.ok(got.includes("proxy/mod.ts") && got.includes("rpc/yaml.ts"), got.join(" "));
  assert.ok(got.includes("rpc/vendor/js_yaml.js"), got.join(" "));
  assert.ok(
    got.includes("proxy/config/credentials.ts") && got.includes("proxy/config/host_config.ts"),
  );
});

Deno.test("isx proxy run's one dynamic import is the tools reader", async () => {
  const g = await graphOf("cli/proxy_run.ts");
  const self = g.modules.find((m) => m.specifier === ROOT + "cli/proxy_run.ts")!;
  const dynamic = (self.dependencies ?? []).filter((d) => d.isDynamic).map((d) =>
    d.code?.specifier?.slice(ROOT.length)
  );
  assert.deepEqual(dynamic, ["mcp/tool_rules.ts"]);
  assert.ok(all(g, "cli/proxy_run.ts").includes("rpc/vendor/zod.js")); // it is what brings zod
});

Deno.test("isx mcp answers the handshake and tools/list with the protocol layer alone", async () => {
  // issue 11 (start-up): an agent spawns one `isx mcp` per session and waits for initialize;
  // the session, the tool table, zod and js-yaml load after it (cli/mcp_backend.ts)
  const got = await loads("cli/mcp.ts");
  assert.deepEqual(under(got, "npm:", "rpc/vendor/", "node:crypto", "cli/mcp_backend.ts"), []);
  assert.deepEqual(under(got, "mcp/session/", "mcp/tasks/", "mcp/templates/", "mcp/host/"), []);
  assert.deepEqual(under(got, "mcp/tools/").filter((m) => !/\/(catalog|fault)\./.test(m)), []);
  assert.deepEqual(under(got, "rpc/base.ts", "rpc/incus/", "rpc/mod.ts", "proxy/", "guest/"), []);
  // the graph is read right: the protocol layer and the generated tools/list are there
  assert.ok(got.includes("mcp/server/mod.ts") && got.includes("mcp/tools/catalog.json"));
});

Deno.test("isx mcp's backend loads neither the proxy server, the template builder nor the sandbox engine", async () => {
  const got = [...new Set([...await loads("cli/mcp.ts"), ...await loads("cli/mcp_backend.ts")])];
  assert.deepEqual(under(got, "proxy/mod.ts", "proxy/relay/server.ts", "proxy/host/_start.ts"), []);
  assert.deepEqual(
    under(got, "proxy/tls/intercept.ts", "proxy/relay/relay.ts", "proxy/tls/ca.ts"),
    [],
  );
  assert.deepEqual(under(got, "mcp/mod.ts", "mcp/templates/mod.ts", "mcp/templates/build.ts"), []);
  assert.deepEqual(under(got, "mcp/templates/program.ts", "mcp/templates/run_steps.ts"), []);
  assert.deepEqual(under(got, "npm:/@peculiar", "rpc/sandbox/", "rpc/mod.ts"), []);
  // node:crypto starts Deno's Node layer (~30 ms): hashes come from rpc/sha256.ts
  assert.deepEqual(under(got, "node:crypto"), []);
  // the graph is read right: the session, the tools and the proxy's config reader are there
  assert.ok(got.includes("mcp/session/mod.ts") && got.includes("mcp/tools/mod.ts"));
  assert.ok(got.includes("proxy/config/host_config.ts"));
});

Deno.test("isx list loads neither the proxy server, the template builder nor the MCP server", async () => {
  // issue 11 (start-up): list has its own module, without branch's loader and preflight
  const got = await loads("cli/list.ts");
  assert.deepEqual(under(got, "proxy/mod.ts", "proxy/relay/server.ts", "proxy/host/_start.ts"), []);
  assert.deepEqual(
    under(got, "proxy/tls/intercept.ts", "proxy/relay/relay.ts", "proxy/tls/ca.ts"),
    [],
  );
  assert.deepEqual(under(got, "mcp/mod.ts", "mcp/templates/mod.ts", "mcp/templates/build.ts"), []);
  assert.deepEqual(under(got, "mcp/templates/program.ts", "mcp/templates/run_steps.ts"), []);
  assert.deepEqual(under(got, "mcp/server/", "mcp/session/", "mcp/tools/", "mcp/tasks/"), []);
  // no npm package and no zod: /health is checked by hand, config.yaml read by rpc/yaml.ts
  // (js-yaml, pre-built)
  assert.deepEqual(under(got, "npm:", "rpc/vendor/zod.js", "node:crypto"), []);
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/mod.ts", "mcp/templates/", "proxy/"), []);
  assert.deepEqual(under(got, "mcp/instances/branch.ts", "mcp/instances/preflight.ts"), []);
  assert.ok(got.includes("mcp/instances/list.ts")); // the graph is read right
});

Deno.test("isx branch|start|stop|destroy load neither the MCP server, its sessions nor isx shell", async () => {
  // issue 24 (start-up): cli/instances.ts takes mcp/instances/commands.ts, not the barrels
  const got = await loads("cli/instances.ts");
  assert.deepEqual(under(got, "mcp/mod.ts", "mcp/server/", "mcp/session/", "mcp/tools/"), []);
  assert.deepEqual(under(got, "mcp/tasks/", "mcp/delegate/", "mcp/templates/build.ts"), []);
  assert.deepEqual(under(got, "mcp/instances/shell.ts", "mcp/pool/keeper.ts", "guest/"), []);
  // nor the schemas (zod) and the loader of the definitions: branch imports them once its
  // first requests are sent (cli/commands.ts LAZY_MODULES)
  assert.deepEqual(
    under(got, "rpc/vendor/zod.js", "mcp/templates/schema.ts", "mcp/templates/load.ts"),
    [],
  );
  assert.deepEqual(under(got, "npm:"), []);
  assert.ok(got.includes("mcp/instances/branch.ts")); // the graph is read right
});
