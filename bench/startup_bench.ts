// deno-lint-ignore-file no-console -- a benchmark prints its figures
/**
 * Start-up of the commands people and SDKs spawn most, through the launchers a user runs
 * (`bin/isb`, `bin/isx`), against the floor of any Deno process: a bare `deno run` of a
 * one-line script (run by hand; prints medians and ratios, asserts nothing).
 *
 * Each figure is spawn → the first protocol answer: the hello line of `isb rpc` (and, beside
 * it, the answer to a `version` sent at once, which waits for the library to load), the
 * answer to `initialize` of `isx mcp`, and the answer to `list_templates` sent after the
 * answers to `initialize` and `tools/list` (issue 9's "spawn → initialize → tools/list →
 * list_templates", in a fresh home approving `--template`), the first line of `isx --help`,
 * the whole output of `isx list` (which includes its Incus calls; the same calls made in a
 * warm process are printed beside it, so "start-up + the Incus call" can be read off). Runs
 * are alternated between the commands (and the checkouts) so that the machine's noise falls
 * on all of them alike. Beside each wall time is the CPU time the process had used by its answer
 * (its threads' `schedstat`), which a loaded host changes much less.
 *
 * The launchers run the pre-built program (`scripts/prebuild.ts`) when it is fresh, as a user's
 * would; which one each checkout runs is printed first. `--sources` runs every command of this
 * checkout a second time with `ISX_PREBUILT=0` (main.ts and its graph), alternated, so the
 * pre-built program's gain is read off one run. `isb rpc (→ sandbox.list)` is real work: the
 * engine loaded, the Incus client made, one call answered.
 *
 * `--against DIR` runs every command of another checkout too (e.g. `git worktree add` of the
 * commit before a change), alternated with this one's, and prints its figures beside.
 *
 * `deno run -A bench/startup_bench.ts [--runs N (default 15)] [--only NAME,…] [--against DIR]
 * [--template tpl-minimal] [--sources]`
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "15" },
    only: { type: "string" },
    against: { type: "string" },
    template: { type: "string", default: "tpl-minimal" },
    sources: { type: "boolean", default: false },
  },
});
const RUNS = Number(values.runs);
const DENO = Deno.execPath();

interface Case {
  name: string;
  cmd: string[];
  /** Written to stdin right after spawn (a request), if any. */
  input?: string;
  /** Sent once the line before it is answered: `[id awaited, line to send]`. */
  then?: [number, string][];
  /** Extra environment (a fresh home). */
  env?: Record<string, string>;
  /** Working directory: the checkout's own (the launchers cache flags per directory). */
  cwd?: string;
  /** True when the answer has arrived, given all stdout so far. */
  done(out: string): boolean;
}

const ONE_LINE = await Deno.makeTempFile({ suffix: ".ts" });
await Deno.writeTextFile(ONE_LINE, 'console.log("ready");\n');

const INIT = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "startup-bench", version: "1" },
  },
}) + "\n";

// a fresh home that approves the template (isx mcp's list_templates answers from it)
const HOME = await Deno.makeTempDir({ prefix: "isx-startup-bench-" });
await Deno.mkdir(`${HOME}/config/isx`, { recursive: true });
await Deno.mkdir(`${HOME}/state/isx`, { recursive: true });
await Deno.writeTextFile(`${HOME}/config/isx/config.yaml`, "proxy:\n  ports: {health: 9}\n");
await Deno.writeTextFile(`${HOME}/config/isx/mcp.yaml`, `templates: [${values.template}]\n`);
const HOME_ENV = {
  HOME,
  XDG_CONFIG_HOME: `${HOME}/config`,
  XDG_STATE_HOME: `${HOME}/state`,
  XDG_CACHE_HOME: `${HOME}/cache`,
  DENO_DIR: Deno.env.get("DENO_DIR") ||
    `${Deno.env.get("XDG_CACHE_HOME") || `${Deno.env.get("HOME")}/.cache`}/deno`,
};
const rpcLine = (id: number, method: string, params: Record<string, unknown> = {}) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n";
const answered = (id: number) => (o: string) =>
  o.split("\n").some((l) => l.startsWith(`{"jsonrpc":"2.0","id":${id},`));

const line = (out: string) => out.includes("\n");
/** The commands of one checkout, named with `tag` when it is not this one. */
function casesOf(root: string, tag: string, sources = false): Case[] {
  const cases: Case[] = [
    { name: `isb rpc (hello)${tag}`, cmd: [`${root}/bin/isb`, "rpc"], done: line },
    {
      name: `isb rpc (version)${tag}`,
      cmd: [`${root}/bin/isb`, "rpc"],
      input: '{"id":1,"method":"version"}\n',
      done: (o: string) => o.split("\n").some((l) => l.startsWith('{"id":1,')),
    },
    {
      // real work: the engine, the Incus client and one call (what `isx list` lists, read only)
      name: `isb rpc (→ sandbox.list)${tag}`,
      cmd: [`${root}/bin/isb`, "rpc"],
      input: '{"id":1,"method":"sandbox.list","params":{}}\n',
      done: (o: string) => o.split("\n").some((l) => l.startsWith('{"id":1,')),
    },
    {
      name: `isx mcp (initialize)${tag}`,
      cmd: [`${root}/bin/isx`, "mcp"],
      input: INIT,
      done: (o: string) => o.split("\n").some((l) => l.includes('"id":1')),
    },
    {
      name: `isx mcp (→ list_templates)${tag}`,
      cmd: [`${root}/bin/isx`, "mcp", "--no-preflight"],
      env: HOME_ENV,
      input: INIT,
      then: [
        [1, rpcLine(2, "tools/list")],
        [2, rpcLine(3, "tools/call", { name: "list_templates", arguments: {} })],
      ],
      done: answered(3),
    },
    { name: `isx --help${tag}`, cmd: [`${root}/bin/isx`, "--help"], done: line },
    { name: `isx list${tag}`, cmd: [`${root}/bin/isx`, "list"], done: () => false },
  ];
  const env = (c: Case) => sources ? { ...c.env, ISX_PREBUILT: "0" } : c.env;
  return cases.map((c) => ({ ...c, cwd: root, ...(env(c) ? { env: env(c) } : {}) }));
}
const AGAINST = values.against?.replace(/\/$/, "");
const CASES: Case[] = [
  { name: "deno run (one line)", cmd: [DENO, "run", ONE_LINE], done: line },
  ...casesOf(ROOT, ""),
  ...(values.sources ? casesOf(ROOT, " [sources]", true) : []),
  ...(AGAINST ? casesOf(AGAINST, ` [${AGAINST.split("/").pop()}]`) : []),
].filter((c) => !values.only || values.only.split(",").some((o) => c.name.startsWith(o)));

/**
 * CPU milliseconds the process has used so far, all its threads (each task's `schedstat`, in
 * nanoseconds): on a loaded host the wall time to an answer is mostly waiting for a core,
 * the CPU time much less so. NaN once the process is gone.
 */
function cpuMs(pid: number): number {
  let ns = 0;
  try {
    for (const e of Deno.readDirSync(`/proc/${pid}/task`)) {
      ns += Number(Deno.readTextFileSync(`/proc/${pid}/task/${e.name}/schedstat`).split(" ")[0]);
    }
  } catch {
    return NaN;
  }
  return ns / 1e6;
}

/** CPU milliseconds to the answer of the last {@link once} (NaN when it ran to its end). */
let lastCpu = NaN;

/** Spawn → answer in ms; the process is ended after its answer (or runs to its end). */
async function once(c: Case): Promise<number> {
  const t0 = performance.now();
  const child = new Deno.Command(c.cmd[0]!, {
    args: c.cmd.slice(1),
    ...(c.env ? { env: c.env } : {}),
    ...(c.cwd ? { cwd: c.cwd } : {}),
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const w = child.stdin.getWriter();
  if (c.input) await w.write(new TextEncoder().encode(c.input)).catch(() => {});
  let out = "";
  let t = NaN;
  lastCpu = NaN;
  const dec = new TextDecoder();
  const then = [...c.then ?? []];
  for await (const chunk of child.stdout) {
    out += dec.decode(chunk, { stream: true });
    while (then[0] && answered(then[0][0])(out)) {
      await w.write(new TextEncoder().encode(then.shift()![1]));
    }
    if (c.done(out)) {
      t = performance.now() - t0;
      lastCpu = cpuMs(child.pid);
      break;
    }
  }
  await w.close().catch(() => {}); // stdin ends: rpc and mcp exit
  const status = await child.status;
  if (Number.isNaN(t)) t = performance.now() - t0;
  if (!status.success && !c.done(out)) throw new Error(`${c.name} exited ${status.code}`);
  if (c.then && /"isError":true/.test(out)) throw new Error(`${c.name}: ${out.slice(-300)}`);
  return t;
}

/** The Incus calls `isx list` makes, timed in a warm process (the "+ the Incus call"). */
async function incusCall(): Promise<number> {
  const socket = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";
  const client = createIncusClient({ socket, project: "" });
  try {
    const t0 = performance.now();
    await client.call("GET", "/1.0/instances", { query: { recursion: 2 } });
    return performance.now() - t0;
  } finally {
    client.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

const times = new Map<string, number[]>(CASES.map((c) => [c.name, []]));
const cpus = new Map<string, number[]>(CASES.map((c) => [c.name, []]));
const incus: number[] = [];
for (const c of CASES) await once(c).catch(() => {}); // warm the caches (module, flags)
for (let i = 0; i < RUNS; i++) {
  for (const c of CASES) {
    try {
      times.get(c.name)!.push(await once(c));
      if (Number.isFinite(lastCpu)) cpus.get(c.name)!.push(lastCpu);
    } catch (e) {
      console.error(`run failed: ${(e as Error).message}`);
    }
  }
  if (CASES.some((c) => c.name.startsWith("isx list"))) {
    incus.push(await incusCall().catch(() => NaN));
  }
}
await Deno.remove(ONE_LINE);
await Deno.remove(HOME, { recursive: true });

const base = median(times.get("deno run (one line)") ?? []);
const baseCpu = median(cpus.get("deno run (one line)") ?? []);
const load = Deno.loadavg().map((x) => x.toFixed(1)).join(" ");
for (const root of [ROOT, ...(AGAINST ? [AGAINST] : [])]) {
  const o = await new Deno.Command(`${root}/bin/isb`, {
    args: ["rpc"],
    cwd: root,
    env: { ISX_LAUNCH_PRINT: "entry" },
    stdout: "piped",
    stderr: "null",
  }).output();
  console.log(`${root}: the launchers run ${new TextDecoder().decode(o.stdout).trim() || "?"}`);
}
console.log(`startup, ${RUNS} alternated runs each, spawn → answer (median; load ${load}):`);
for (const c of CASES) {
  const m = median(times.get(c.name)!);
  const ratio = Number.isFinite(base) ? ` ${(m / base).toFixed(1)}x bare deno run` : "";
  const cm = median(cpus.get(c.name)!);
  const cpu = Number.isFinite(cm)
    ? `   cpu ${cm.toFixed(1).padStart(6)} ms ${(cm / baseCpu).toFixed(1)}x`
    : "";
  console.log(`  ${c.name.padEnd(40)} ${m.toFixed(1).padStart(7)} ms${ratio.padEnd(20)}${cpu}`);
}
if (incus.length) {
  console.log(`  (the Incus call of isx list, warm process: ${median(incus).toFixed(1)} ms)`);
}
