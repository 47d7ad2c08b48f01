/**
 * What each mode loads at start-up, read off the module graph Deno itself builds
 * (`deno info --json main.ts`): the modules reachable from main.ts and the command's module
 * through static imports. Dynamic imports are the dispatch table's loaders (cli/commands.ts),
 * so a command's module counts only for its own command. Spawn cost is paid per SDK client
 * (`isb rpc`) and per agent session (`isx mcp`), and every module costs start-up time.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).href;
const info = await new Deno.Command(Deno.execPath(), {
  args: ["info", "--json", "main.ts"],
  cwd: new URL("..", import.meta.url).pathname,
  stdout: "piped",
  stderr: "inherit",
}).output();
if (!info.success) throw new Error("deno info --json main.ts failed");
interface Dep {
  code?: { specifier?: string };
  isDynamic?: boolean;
}
const graph = JSON.parse(new TextDecoder().decode(info.stdout)) as {
  modules: { specifier: string; dependencies?: Dep[] }[];
  redirects: Record<string, string>;
};
const MODULES = new Map(graph.modules.map((m) => [m.specifier, m]));

/** Repo-relative paths and npm package specifiers loaded from these roots. */
function loads(...roots: string[]): string[] {
  const seen = new Set<string>();
  const stack = roots.map((r) => ROOT + r);
  while (stack.length) {
    const s0 = stack.pop()!;
    const s = graph.redirects[s0] ?? s0;
    if (seen.has(s)) continue;
    seen.add(s);
    for (const d of MODULES.get(s)?.dependencies ?? []) {
      if (d.code?.specifier && !d.isDynamic) stack.push(d.code.specifier);
    }
  }
  return [...seen].map((s) => (s.startsWith(ROOT) ? s.slice(ROOT.length) : s)).sort();
}

const COMMAND_MODULES = [
  "cli/rpc.ts",
  "cli/guest.ts",
  "cli/init.ts",
  "cli/build.ts",
  "cli/instances.ts",
  "cli/shell.ts",
  "cli/proxy.ts",
  "cli/mcp.ts",
];
const under = (xs: string[], ...prefixes: string[]) =>
  xs.filter((x) => prefixes.some((p) => x.startsWith(p)));

Deno.test("main.ts alone (isx --help, --version, mistakes) loads no command, engine or npm package", () => {
  const got = loads("main.ts");
  assert.deepEqual(under(got, ...COMMAND_MODULES), []);
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "rpc/incus/", "mcp/", "proxy/"), []);
  assert.deepEqual(under(got, "npm:"), []);
});

Deno.test("isb rpc loads neither the proxy, the MCP layer, the templates nor the guest", () => {
  const got = loads("main.ts", "cli/rpc.ts");
  assert.deepEqual(under(got, "mcp/", "proxy/", "guest/"), []);
  assert.deepEqual(under(got, ...COMMAND_MODULES.filter((m) => m !== "cli/rpc.ts")), []);
  assert.deepEqual(under(got, "npm:/@modelcontextprotocol", "npm:/ajv", "npm:/@peculiar"), []);
  assert.ok(got.includes("rpc/server/mod.ts")); // the graph is read right: rpc has its server
});

Deno.test("isx guest loads neither the sandbox engine, the proxy nor the MCP layer", () => {
  const got = loads("main.ts", "cli/guest.ts");
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "mcp/", "proxy/", "npm:"), []);
  assert.ok(got.includes("guest/mod.ts"));
});

Deno.test("only isb rpc loads the rpc server; no command loads another command's module", () => {
  for (const m of COMMAND_MODULES.filter((m) => m !== "cli/rpc.ts")) {
    const got = loads("main.ts", m);
    assert.deepEqual(under(got, "rpc/server/"), [], m);
    const others = COMMAND_MODULES.filter((o) =>
      o !== m && !(m === "cli/instances.ts" && o === "cli/shell.ts")
    );
    assert.deepEqual(under(got, ...others), [], m);
  }
});

Deno.test("isx proxy run keeps resident neither the sandbox engine nor the MCP layer", () => {
  // The proxy runs for days and keeps every module it loaded (issue 11: footprint).
  const got = loads("main.ts", "cli/proxy.ts", "cli/proxy_run.ts");
  assert.deepEqual(under(got, "rpc/sandbox/", "rpc/server/", "rpc/mod.ts", "mcp/mod.ts"), []);
  assert.deepEqual(under(got, "mcp/server/", "mcp/instances/", "mcp/tools/", "mcp/tasks/"), []);
  assert.deepEqual(under(got, "cli/proxy_status.ts", "cli/proxy_account.ts"), []);
  assert.deepEqual(under(got, "npm:/@modelcontextprotocol", "npm:/ajv"), []);
  // the graph is read right: the proxy and its one entry into mcp/ are there
  assert.ok(got.includes("proxy/mod.ts") && got.includes("mcp/tool_rules.ts"));
});
