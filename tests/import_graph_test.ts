/**
 * The dependency fences of shared/design/architecture.md §3 (habit 15) and the house habits
 * that can be read off the source (1, 5, 7, 8, 10), checked over every `.ts` file.
 */
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const SKIP_DIRS = new Set([".git", "dist", "node_modules", ".isx"]);

async function walk(dir: string, out: string[] = []): Promise<string[]> {
  for await (const e of Deno.readDir(dir)) {
    if (SKIP_DIRS.has(e.name)) continue;
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) await walk(p, out);
    else if (e.isFile && e.name.endsWith(".ts")) out.push(p.slice(ROOT.length + 1));
  }
  return out;
}

const FILES = (await walk(ROOT)).sort();
const SOURCES = new Map<string, string>();
for (const f of FILES) SOURCES.set(f, await Deno.readTextFile(`${ROOT}/${f}`));

const IMPORT_RE =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

function imports(src: string): string[] {
  const out: string[] = [];
  for (const m of src.matchAll(IMPORT_RE)) out.push((m[1] ?? m[2])!);
  return out;
}

function resolve(from: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined; // npm or node: builtin
  const parts = from.split("/").slice(0, -1);
  for (const seg of spec.split("/")) {
    if (seg === "..") parts.pop();
    else if (seg !== ".") parts.push(seg);
  }
  return parts.join("/");
}

const isTest = (f: string) => f.endsWith("_test.ts");
const top = (f: string) => (f.includes("/") ? f.split("/")[0]! : f);

/** The allowed-edge rule: may `from` import `to`? (both repo-relative paths) */
function allowed(from: string, to: string): boolean {
  const [a, b] = [top(from), top(to)];
  if (a === b) {
    if (a === "rpc") {
      const fromCore = /^rpc\/(incus|sandbox)\//.test(from) || !from.startsWith("rpc/server/");
      return !(fromCore && to.startsWith("rpc/server/"));
    }
    // runner scripts import nothing outside guest/ (they are pushed into guests as they are)
    return true;
  }
  if (a === "tests" || a === "bench" || isTest(from)) return true;
  if (from === "main.ts") return b === "cli";
  // the CI driver that reruns live tests over an HTTPS remote is test code kept beside test.sh
  if (from === "scripts/test_over_remote.ts") return true;
  if (a === "scripts") {
    // compile flags, and the command modules to embed
    return ["cli/permissions.ts", "cli/launch.ts", "cli/commands.ts"].includes(to);
  }
  // the guest bundle's entry imports statically what rpc/server loads by a computed specifier
  if (from === "cli/bundle.ts" && to === "rpc/server/methods/mod.ts") return true;
  if (a === "cli") {
    // and rpc's leaf modules, so the root and `isb rpc` start without the engine
    return [
      "rpc/mod.ts",
      "rpc/server/mod.ts",
      "mcp/mod.ts",
      "mcp/tool_rules.ts", // what `isx proxy run` needs of mcp/, without the layer (issue 11)
      "mcp/audit.ts", // isx mcp's connect line in mcp.log, written before the session loads
      // `isx mcp` and the instance commands take only the parts they use (issue 11: start-up)
      "mcp/host/mod.ts",
      "mcp/host/config.ts", // these five: `isx list` (cli/list.ts), without the rest of mcp/
      "mcp/host/guest.ts",
      "mcp/host/proxy_check.ts",
      "mcp/host/session_locks.ts", // `isx list`: a killed server's instances show as orphaned
      "mcp/instances/list.ts",
      "mcp/instances/mod.ts",
      "mcp/instances/commands.ts", // isx branch|start|stop|destroy, without list, shell, the keeper
      "mcp/session/mod.ts",
      "mcp/pool/mod.ts", // isx pool (cli/pool.ts): the keeper and the pool views
      "mcp/server/mod.ts",
      "mcp/tools/mod.ts", // the tool table, loaded by cli/mcp_backend.ts after the handshake
      "mcp/tasks/mod.ts",
      "mcp/templates/load.ts",
      "mcp/templates/schema.ts",
      "proxy/config/host_config.ts",
      "proxy/config/accounts.ts",
      "proxy/mod.ts",
      "guest/mod.ts",
      "rpc/errors.ts",
      "rpc/log.ts",
      "rpc/version.ts",
      "rpc/duration.ts",
      "rpc/base.ts", // the library less the engine (incus_remote.ts, in the proxy process)
      "rpc/prebuilt.ts", // a leaf: where the program's own modules are (sources or pre-built)
      "rpc/timer.ts", // a timer without Node's (isx mcp's sleeps: rpc/timer.ts says why)
    ].includes(to);
  }
  if (a === "mcp") {
    return [
      "rpc/mod.ts",
      "rpc/base.ts", // the library less the sandbox engine, which mcp/ never runs (start-up)
      "rpc/errors.ts", // a leaf: what the modules behind mcp/tool_rules.ts import
      "rpc/host_paths.ts", // a leaf: the host-path check of templates' files, without the engine
      "rpc/jsonl.ts", // leaves: what the protocol layer (mcp/server/) answers the handshake with
      "rpc/version.ts",
      "rpc/timer.ts", // a timer without Node's (the handshake's pause before the session loads)
      "rpc/incus/http_unix.ts", // a leaf: the HTTP/1.1 reader, for the ops port without fetch
      "guest/mod.ts",
      "guest/protocol.ts",
      "proxy/activity/activity.ts",
    ].includes(to);
  }
  // rpc/base.ts: the library without the sandbox engine, for the long-running proxy
  if (a === "proxy") return to === "rpc/mod.ts" || to === "rpc/base.ts";
  return false;
}

Deno.test("every import follows the allowed-edge table of architecture.md §3", () => {
  const bad: string[] = [];
  for (const [f, src] of SOURCES) {
    for (const spec of imports(src)) {
      const to = resolve(f, spec);
      if (to !== undefined && !allowed(f, to)) bad.push(`${f} -> ${to}`);
    }
  }
  assert.deepEqual(bad, []);
});

Deno.test("a _private module is imported only from its own folder", () => {
  const bad: string[] = [];
  for (const [f, src] of SOURCES) {
    for (const spec of imports(src)) {
      const to = resolve(f, spec);
      if (!to) continue;
      const name = to.split("/").pop()!;
      const dir = to.split("/").slice(0, -1).join("/");
      const fromDir = f.split("/").slice(0, -1).join("/");
      if (name.startsWith("_") && dir !== fromDir) bad.push(`${f} -> ${to}`);
    }
  }
  assert.deepEqual(bad, []);
});

Deno.test("there are no import cycles among modules", () => {
  const graph = new Map<string, string[]>();
  for (const [f, src] of SOURCES) {
    graph.set(f, imports(src).map((s) => resolve(f, s)).filter((x): x is string => !!x));
  }
  const state = new Map<string, 1 | 2>();
  const cycles: string[] = [];
  const visit = (n: string, path: string[]) => {
    if (state.get(n) === 2) return;
    if (state.get(n) === 1) {
      cycles.push([...path.slice(path.indexOf(n)), n].join(" -> "));
      return;
    }
    state.set(n, 1);
    for (const m of graph.get(n) ?? []) if (graph.has(m)) visit(m, [...path, n]);
    state.set(n, 2);
  };
  for (const n of graph.keys()) visit(n, []);
  assert.deepEqual(cycles, []);
});

Deno.test("file names are snake_case and no folder has an index.ts", () => {
  const bad = FILES.filter((f) => /(^|\/)index\.ts$/.test(f) || /[A-Z-]/.test(f.split("/").pop()!));
  assert.deepEqual(bad, []);
});

Deno.test("library code throws IsbError, never new Error(", () => {
  const bad = FILES.filter((f) =>
    /^(rpc\/incus|rpc\/sandbox|proxy)\//.test(f) && !isTest(f) &&
    /\bnew Error\(/.test(SOURCES.get(f)!)
  );
  assert.deepEqual(bad, []);
});

Deno.test("only main.ts and cli/ touch the process's stdio and exit", () => {
  const bad = FILES.filter((f) =>
    !isTest(f) &&
    !/^(main\.ts|cli\/|tests\/|bench\/|scripts\/|guest\/task_runner|guest\/agents\/main|guest\/diff\/main)/
      .test(f) &&
    /Deno\.(stdin|stdout|exit)\b|console\.log\(/.test(SOURCES.get(f)!)
  );
  assert.deepEqual(bad, []);
});

const PURE = [
  "rpc/jsonl.ts",
  "rpc/duration.ts",
  "rpc/yaml.ts",
  "rpc/incus/envelope.ts",
  "rpc/sandbox/resolve/resolve.ts",
  "rpc/host_paths.ts",
  "rpc/sandbox/plan/plan.ts",
  "rpc/sandbox/compose/_interpolate.ts",
  "rpc/sandbox/compose/_merge.ts",
  "rpc/sandbox/compose/_document.ts",
  "proxy/config/policy.ts",
  "proxy/config/accounts.ts",
  "proxy/config/_rules.ts",
  "proxy/config/vertex.ts",
  "proxy/callers/_identity.ts",
  "proxy/callers/handoff.ts",
  "proxy/egress/guard.ts",
  "proxy/relay/rewrite.ts",
  "proxy/activity/counter.ts",
  "proxy/activity/usage.ts",
  "proxy/activity/activity.ts",
  "proxy/http1/http1.ts",
  "proxy/http1/chunked.ts",
  "proxy/relay/scrub.ts",
  "proxy/tls/leaf_cache.ts",
  "proxy/http1/decode.ts",
  "guest/protocol.ts",
  "guest/task_shell.ts",
  "guest/_foreground_shell.ts",
  "mcp/tasks/state.ts",
  "mcp/tasks/parse.ts",
  "mcp/tasks/script.ts",
  "mcp/tasks/tail.ts",
  "guest/agents/events.ts",
  "guest/agents/launch.ts",
  "guest/agents/claude.ts",
  "guest/agents/codex.ts",
  "guest/agents/pi.ts",
  "guest/agents/opencode.ts",
  "guest/agents/table.ts",
  "guest/agents/argv.ts",
  "guest/diff/core.ts",
];

/** Folders whose every module is pure, but for the named edges that gather their inputs. */
const PURE_DIRS = ["rpc/sandbox/spec/", "rpc/sandbox/resolve/"];
const PURE_DIR_EDGES = ["rpc/sandbox/resolve/host_facts.ts"];

Deno.test("the pure modules open no sockets, files, processes or timers", () => {
  const bad: string[] = [];
  const inPureDirs = FILES.filter((f) =>
    !isTest(f) && PURE_DIRS.some((d) => f.startsWith(d)) && !PURE_DIR_EDGES.includes(f)
  );
  for (const f of [...PURE, ...inPureDirs]) {
    const src = SOURCES.get(f);
    if (src === undefined) continue; // not written yet
    if (/\bDeno\.(?!customInspect)|\bfetch\(|node:net|\bsetTimeout\(/.test(src)) bad.push(f);
  }
  assert.deepEqual(bad, []);
});

Deno.test("no test turns Deno's op or resource sanitizers off", () => {
  const bad = FILES.filter((f) =>
    f !== "tests/import_graph_test.ts" &&
    /sanitizeOps:\s*false|sanitizeResources:\s*false/.test(SOURCES.get(f)!)
  );
  assert.deepEqual(bad, []);
});

/**
 * The sandbox engine's concern folders, lowest first: a module may import its own folder and
 * the folders before it, never one after it nor the engine's root (`rpc/sandbox/mod.ts`, which
 * composes them). Unit tests may reach anywhere.
 */
const SANDBOX_LAYERS = [
  "spec",
  "exec",
  "instances",
  "egress",
  "resolve",
  "plan",
  "lifecycle",
  "compose",
];
const SANDBOX = "rpc/sandbox/";

Deno.test("rpc/sandbox/ holds only mod.ts and _private files beside its concern folders", () => {
  const flat = FILES.filter((f) =>
    f.startsWith(SANDBOX) && !f.slice(SANDBOX.length).includes("/") &&
    f !== `${SANDBOX}mod.ts` && !f.slice(SANDBOX.length).startsWith("_")
  );
  assert.deepEqual(flat, []);
  const dirs = [
    ...new Set(
      FILES.filter((f) => f.startsWith(SANDBOX) && f.slice(SANDBOX.length).includes("/"))
        .map((f) => f.slice(SANDBOX.length).split("/")[0]!),
    ),
  ].sort();
  assert.deepEqual(
    dirs,
    [...SANDBOX_LAYERS].sort(),
    "a new folder takes its place in SANDBOX_LAYERS",
  );
});

Deno.test("every rpc/sandbox/ concern folder has a mod.ts whose module doc says what it holds", () => {
  const bad: string[] = [];
  for (const d of SANDBOX_LAYERS) {
    const src = SOURCES.get(`${SANDBOX}${d}/mod.ts`);
    if (src === undefined || !/^\/\*\*[\s\S]{80,}?@module[\s\S]*?\*\//.test(src)) bad.push(d);
  }
  assert.deepEqual(bad, []);
});

Deno.test("an rpc/sandbox/ concern folder imports only the folders below it, never the root", () => {
  const bad: string[] = [];
  for (const [f, src] of SOURCES) {
    if (!f.startsWith(SANDBOX) || isTest(f)) continue;
    const from = f.slice(SANDBOX.length).split("/");
    if (from.length < 2) continue; // the root composes the folders
    const level = SANDBOX_LAYERS.indexOf(from[0]!);
    for (const spec of imports(src)) {
      const to = resolve(f, spec);
      if (!to?.startsWith(SANDBOX)) continue;
      const parts = to.slice(SANDBOX.length).split("/");
      if (parts.length < 2 || SANDBOX_LAYERS.indexOf(parts[0]!) > level) bad.push(`${f} -> ${to}`);
    }
  }
  assert.deepEqual(bad, []);
});

/**
 * The modules under `root` (`depth` = which files count: a predicate on their path's part
 * count) that no file outside their own folder imports yet lack the `_` prefix.
 */
function publicButPrivate(root: string, depth: (parts: number) => boolean): string[] {
  const importers = new Map<string, Set<string>>();
  for (const [f, src] of SOURCES) {
    for (const spec of imports(src)) {
      const to = resolve(f, spec);
      if (to) importers.set(to, (importers.get(to) ?? new Set()).add(f));
    }
  }
  const dir = (f: string) => f.split("/").slice(0, -1).join("/");
  return FILES.filter((f) => {
    const name = f.split("/").pop()!;
    if (!f.startsWith(root) || !depth(f.split("/").length)) return false;
    if (name === "mod.ts" || name.startsWith("_") || isTest(f)) return false;
    return ![...importers.get(f) ?? []].some((u) => dir(u) !== dir(f));
  });
}

Deno.test("an rpc/sandbox/ module only its own folder imports has the _ prefix", () => {
  assert.deepEqual(publicButPrivate(SANDBOX, (n) => n >= 4), []);
});

/**
 * The proxy's concern folders (proxy/mod.ts says what each holds). Unlike the sandbox
 * engine's they are not layered: the relay, the callers and the policy use each other's
 * types both ways, so the fences here are the `_` prefix (test above) and the room itself.
 */
const PROXY_FOLDERS = [
  "activity",
  "callers",
  "config",
  "dashboard",
  "egress",
  "host",
  "http1",
  "mcp_endpoint",
  "relay",
  "tls",
];
const PROXY = "proxy/";

Deno.test("proxy/ holds only mod.ts beside its concern folders", () => {
  const flat = FILES.filter((f) =>
    f.startsWith(PROXY) && !f.slice(PROXY.length).includes("/") && f !== `${PROXY}mod.ts`
  );
  assert.deepEqual(flat, []);
  const dirs = [
    ...new Set(
      FILES.filter((f) => f.startsWith(PROXY) && f.slice(PROXY.length).includes("/"))
        .map((f) => f.slice(PROXY.length).split("/")[0]!),
    ),
  ].sort();
  assert.deepEqual(dirs, PROXY_FOLDERS, "a new folder takes its place in PROXY_FOLDERS");
  // the root's doc names every folder, and exports what each folder's mod.ts exports
  const root = SOURCES.get(`${PROXY}mod.ts`)!;
  for (const d of PROXY_FOLDERS) {
    assert.ok(root.includes(`\`${d}/\``), `proxy/mod.ts does not describe ${d}/`);
    assert.ok(root.includes(`export * from "./${d}/mod.ts";`), `proxy/mod.ts skips ${d}/`);
  }
});

Deno.test("every proxy/ concern folder has a mod.ts whose module doc says what it holds", () => {
  const bad: string[] = [];
  for (const d of PROXY_FOLDERS) {
    const src = SOURCES.get(`${PROXY}${d}/mod.ts`);
    if (src === undefined || !/^\/\*\*[\s\S]{80,}?@module[\s\S]*?\*\//.test(src)) bad.push(d);
    // and names each public module of the folder
    for (const f of FILES) {
      const [top, dir, name] = f.split("/");
      if (top !== "proxy" || dir !== d || !name || name === "mod.ts" || isTest(f)) continue;
      if (!src?.includes(`\`${name}\``)) bad.push(`${d}/mod.ts does not name ${name}`);
    }
  }
  assert.deepEqual(bad, []);
});

Deno.test("a proxy/ module only its own folder imports has the _ prefix", () => {
  assert.deepEqual(publicButPrivate(PROXY, (n) => n === 3), []);
});
