/**
 * Benchmarks of the isx host layer, run by hand against a real incusd (btrfs pool), in a test
 * lab (tests/helpers/lab.ts: the lab's project and bridge, never the user's; `ISX_TEST_LAB`
 * names the suite's, else the bench makes and removes its own):
 *
 * 1. `isx branch` (the library call, and the CLI process through `bin/isx` as a user runs it
 *    from PATH, preflight included) to a running instance with an IPv4 address, against two
 *    bare baselines: `incus copy` + `incus start` (CLI processes) and the same copy and start
 *    as raw REST calls in one process. Both wait for the address with a
 *    `GET /1.0/instances/NAME/state` every 25 ms over the socket (no `incus list` process per
 *    poll, whose Go start-ups loaded the 2-core host while the guest booted), the way
 *    `isx branch` did before it watched the bridge's lease file (mcp/host/leases.ts: the state
 *    is read once the guest has its lease, and every 250 ms before). Target: within
 *    1.2x of the baseline and under 1.5 s. The bench's home runs a real proxy (`isx proxy
 *    start` on the lab bridge, random ports, no DNS), so the preflight reads a live `/health`
 *    and the CA check compares a real served CA. Printed per step: each step's median for
 *    the library call and the CLI (the steps `isx branch` adds over a copy and a start:
 *    preflight, static address, CA check, secret delivery), and what the CLI process costs
 *    outside them (start-up to the command's first line, then launcher and exit).
 * 2. A rebuild of a template with apt packages and an npm tool with a warm download cache
 *    against the same build with a cold one.
 *
 *   ISX_TEST_LAB=<id> deno run -A bench/branch_bench.ts [rounds=5] [branch|rebuild|all]
 *
 * Without the rebuild part, the template is a plain copy of the image (no build).
 *
 * @module
 */

import { createIncusClient, type IncusClient } from "../rpc/mod.ts";
import { branchInstance, SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { IsxHome, type IsxRun } from "../tests/templates_env.ts";
import {
  closeLiveLab,
  LAB,
  LIVE_BRIDGE,
  LIVE_PROJECT,
  LIVE_SOCKET,
  NO_INCUS,
} from "../tests/helpers/live.ts";
import { ROOT } from "../tests/helpers/spawn.ts";

const ROUNDS = Number(Deno.args[0] ?? 5);
const PART = Deno.args[1] ?? "all";
const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const tag = crypto.randomUUID().slice(0, 6);
const TPL = `t-bench-${tag}`;
const INCUS = ["--project", LIVE_PROJECT];
const VERBOSE = Deno.env.get("BRANCH_BENCH_VERBOSE") === "1";
// BRANCH_BENCH_NO_PROXY=1: no proxy in the home (the CLI runs --no-preflight), to tell what the
// running proxy's reaction to a new pinned instance (its registry, the bridge guard) costs
const NO_PROXY = Deno.env.get("BRANCH_BENCH_NO_PROXY") === "1";
const BRANCH_FLAGS = NO_PROXY ? ["--json", "--no-preflight"] : ["--json"];

function sh(cmd: string, args: string[]): Promise<Deno.CommandOutput> {
  return new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
}

async function must(cmd: string, args: string[]): Promise<string> {
  const o = await sh(cmd, args);
  if (!o.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
  }
  return new TextDecoder().decode(o.stdout);
}

/** `isx <args>` through `bin/isx`, as a user runs it from PATH (the launcher's flag cache). */
async function isxBin(
  home: IsxHome,
  args: string[],
): Promise<IsxRun & { outMs: number; wallMs: number }> {
  const deno = Deno.execPath().replace(/\/[^/]*$/, "");
  const t = performance.now();
  const child = new Deno.Command(`${ROOT}/bin/isx`, {
    args,
    cwd: home.root,
    env: { ...home.env, PATH: `${deno}:/usr/local/bin:/usr/bin:/bin` },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  // when the output (one line) arrives, apart from when the process is gone
  let outMs = 0;
  const chunks: Uint8Array[] = [];
  const stdout = (async () => {
    for await (const c of child.stdout) {
      if (!outMs) outMs = performance.now() - t;
      chunks.push(c);
    }
  })();
  const [status, err] = await Promise.all([
    child.status,
    new Response(child.stderr).text(),
    stdout,
  ]);
  const wallMs = performance.now() - t;
  const dec = new TextDecoder();
  const out = dec.decode(new Uint8Array(chunks.flatMap((c) => [...c])));
  return { code: status.code, stdout: out, stderr: err, outMs, wallMs };
}

/** Polls the instance's state over the socket every 25 ms until it has a global IPv4. */
async function waitIpv4(client: IncusClient, name: string): Promise<void> {
  for (let i = 0; i < 2400; i++) {
    const st = await client.getInstanceState(name);
    for (const [dev, n] of Object.entries(st.network ?? {})) {
      if (dev !== "lo" && n.addresses.some((a) => a.family === "inet" && a.scope === "global")) {
        return;
      }
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${name}: no IPv4 address after 60 s`);
}

/** `incus copy` + `incus start` as CLI processes, then the address. */
async function baselineCli(client: IncusClient, name: string): Promise<number> {
  const t = performance.now();
  await must("incus", ["copy", TPL, name, "--instance-only", ...INCUS]);
  await must("incus", ["start", name, ...INCUS]);
  await waitIpv4(client, name);
  return performance.now() - t;
}

/** The same copy and start as REST calls in this process, then the address; `steps` gets each. */
async function baselineRest(
  client: IncusClient,
  name: string,
  steps: Record<string, number>,
): Promise<number> {
  const t = performance.now();
  let at = t;
  const lap = (step: string) => {
    const now = performance.now();
    steps[step] = now - at;
    at = now;
  };
  const copy = await client.call("POST", "/1.0/instances", {
    body: { name, source: { type: "copy", source: TPL, instance_only: true } },
  });
  if (copy.kind === "async") await client.waitOperation(copy, { step: `copy ${TPL} to ${name}` });
  lap("copy");
  await client.startInstance(name, { step: `start ${name}` });
  lap("start");
  await waitIpv4(client, name);
  lap("ipv4");
  return performance.now() - t;
}

function say(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function fmt(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

async function destroy(client: IncusClient, names: string[]): Promise<void> {
  await Promise.all(names.map(async (n) => {
    await client.stopInstance(n, { step: `stop ${n}`, force: true }).catch(() => {});
    await client.deleteInstance(n, { step: `delete ${n}` }).catch(() => {});
  }));
}

async function timedBuild(home: IsxHome, args: string[]): Promise<number> {
  const t = performance.now();
  const r = await home.isx(["build", "-q", ...args]);
  if (r.code !== 0) throw new Error(r.stdout + r.stderr);
  return performance.now() - t;
}

const load = () => Deno.loadavg().map((x) => x.toFixed(2)).join(" ");

/** The CPU seconds this process and its children used so far (from /proc). */
function cpuSeconds(): number {
  const f = Deno.readTextFileSync("/proc/self/stat").split(") ")[1]!.split(" ");
  // utime, stime, cutime, cstime: fields 14-17, so 11-14 after the name
  return [11, 12, 13, 14].reduce((a, i) => a + Number(f[i]), 0) / 100;
}

/** Part 1: the branch timings, medians of ROUNDS rounds. */
async function branchPart(
  client: IncusClient,
  home: IsxHome,
  place: { bridge: string; ports: { tls: number; forward: number } },
  made: string[],
): Promise<void> {
  const baseCli: number[] = [];
  const baseRest: number[] = [];
  const lib: number[] = [];
  const cli: number[] = [];
  // each step's milliseconds (BranchResult.steps; the CLI's --json adds its own), by variant
  const restSteps = new Map<string, number[]>();
  const libSteps = new Map<string, number[]>();
  const cliSteps = new Map<string, number[]>();
  const keep = (into: Map<string, number[]>, steps: Record<string, number>) => {
    for (const [k, v] of Object.entries(steps)) into.set(k, [...into.get(k) ?? [], v]);
  };
  let failures = 0;
  // a first run fills the launcher's flag cache and Deno's code cache, as a user's first does
  {
    const w = `${TPL}-warm`;
    made.push(w);
    const res = await isxBin(home, ["branch", w, "--from", TPL, ...BRANCH_FLAGS]);
    if (res.code !== 0) throw new Error(`warm-up isx branch: ${res.stderr}`);
    await destroy(client, [w]);
  }
  const cpu0 = cpuSeconds();
  const t0 = performance.now();
  for (let i = 0; i < ROUNDS; i++) {
    const b = `${TPL}-b${i}`, r = `${TPL}-r${i}`, l = `${TPL}-l${i}`, c = `${TPL}-c${i}`;
    made.push(b, r, l, c);
    // the order turns each round, so a drifting daemon weighs on every variant alike
    const runs: (() => Promise<void>)[] = [
      async () => void baseCli.push(await baselineCli(client, b)),
      async () => {
        const steps: Record<string, number> = {};
        baseRest.push(await baselineRest(client, r, steps));
        keep(restSteps, steps);
      },
      async () => {
        const t = performance.now();
        const res = await branchInstance(client, { name: l, template: TPL, proxy: place });
        lib.push(performance.now() - t);
        keep(libSteps, res.steps);
      },
      async () => {
        const t = performance.now();
        const res = await isxBin(home, ["branch", c, "--from", TPL, ...BRANCH_FLAGS]);
        const wall = performance.now() - t;
        if (res.code !== 0) throw new Error(res.stderr);
        cli.push(wall);
        const out = JSON.parse(res.stdout);
        keep(cliSteps, out.steps);
        if (VERBOSE) {
          say(
            `  cli run: wall ${wall.toFixed(0)}, output at ${
              res.outMs.toFixed(0)
            }, startup ${out.startup}, elapsed ${out.elapsed}`,
          );
        }
        if (typeof out.startup === "number" && typeof out.elapsed === "number") {
          // Deno's time origin is its runtime's start, after the launcher and Deno's own boot
          keep(cliSteps, {
            "process: launcher + Deno boot": res.outMs - out.startup - out.elapsed,
            "process: start-up (modules, args)": out.startup,
            "process: exit after the output": res.wallMs - res.outMs,
          });
        }
      },
    ];
    const names = [b, r, l, c];
    for (let k = 0; k < runs.length; k++) {
      const j = (k + i) % runs.length;
      // a run the shared daemon stalls is counted and left out, not the end of the benchmark
      await runs[j]!().catch((e) => {
        failures++;
        say(`a run failed: ${e instanceof Error ? e.message : e}`);
      });
      // removed at once: the next run does not share the 2 cores with this guest's boot
      await destroy(client, [names[j]!]);
    }
  }
  const cpuShare = (cpuSeconds() - cpu0) / ((performance.now() - t0) / 1000);
  const mc = median(baseCli), mr = median(baseRest);
  const vs = (ms: number) =>
    `(${(ms / mc).toFixed(2)}x CLI baseline, ${(ms / mr).toFixed(2)}x REST baseline)`;
  say(
    `medians of ${ROUNDS} rounds; the baselines poll a state GET every 25 ms, isx branch reads ` +
      "the state once the bridge's lease file names the guest",
  );
  say(`baseline incus copy + start (CLI) + wait for IPv4:   ${fmt(mc)}`);
  say(`baseline copy + start as REST calls + wait for IPv4: ${fmt(mr)}`);
  say(`isx branch, library call: ${fmt(median(lib))}  ${vs(median(lib))}`);
  say(`isx branch, CLI process:  ${fmt(median(cli))}  ${vs(median(cli))}`);
  const table = (m: Map<string, number[]>) => {
    for (const [k, v] of m) {
      say(
        `    ${k.padEnd(36)} ${median(v).toFixed(0).padStart(6)} ms  (min ${
          Math.min(...v).toFixed(0)
        }, max ${Math.max(...v).toFixed(0)})`,
      );
    }
  };
  say(`  REST baseline, each step (median):`);
  table(restSteps);
  say(`  library call, each step (median):`);
  table(libSteps);
  say(`  CLI process, each step (median; "(overlapped)" runs inside another step):`);
  table(cliSteps);
  say(
    `bench process and its children: ${
      (cpuShare * 100).toFixed(0)
    }% of a core; load average ${load()}`,
  );
  if (failures) say(`(${failures} runs failed and were left out)`);
}

/** The bench home's config: the lab's bridges, ports of its own, no DNS of the bridge's. */
function labConfig(home: IsxHome): { tls: number; forward: number; health: number } {
  const port = () => 20000 + Math.floor(Math.random() * 20000);
  const ports = { tls: port(), forward: port(), health: port() };
  const cfg = `${home.configDir}/config.yaml`;
  const text = Deno.readTextFileSync(cfg);
  if (!text.includes("\n  bridge: incusbr0\n")) throw new Error(`unexpected ${cfg}: ${text}`);
  Deno.writeTextFileSync(
    cfg,
    text.replace(
      "\n  bridge: incusbr0\n",
      `\n  bridge: ${LAB.bridge}\n  proxy_only_bridge: ${LAB.proxyOnlyBridge}\n  dns: false\n  ports: { tls: ${ports.tls}, forward: ${ports.forward}, health: ${ports.health} }\n`,
    ),
  );
  return ports;
}

if (import.meta.main) {
  if (NO_INCUS) Deno.exit(1);
  say(`branch_bench: project ${LIVE_PROJECT}, ${ROUNDS} rounds, load average ${load()}`);
  const made: string[] = [TPL, `${TPL}-build`];
  await using home = new IsxHome({ config: false });
  const client = createIncusClient({
    socket: LIVE_SOCKET,
    project: LIVE_PROJECT,
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  let proxyUp = false;
  try {
    const init = await home.isx(["init", "--yes"]);
    if (init.code !== 0) throw new Error(init.stderr);
    const ports = labConfig(home);
    if (!NO_PROXY) {
      const up = await home.isx(["proxy", "start"]);
      if (up.code !== 0) throw new Error(`isx proxy start: ${up.stdout}${up.stderr}`);
      proxyUp = true;
    }
    if (PART !== "branch") {
      home.define("templates", TPL, `image: ${IMAGE}\npackages: [jq, make]\ntools: [node]\n`);
      const coldMs = await timedBuild(home, [TPL]);
      const warmMs = await timedBuild(home, [TPL]);
      say(`rebuild, download cache cold: ${fmt(coldMs)}`);
      say(
        `rebuild, download cache warm: ${fmt(warmMs)}  (${(warmMs / coldMs).toFixed(2)}x of cold)`,
      );
    } else {
      home.define("templates", TPL, `image: ${IMAGE}\n`);
      // the shared daemon stalls at times; a build it stalls is tried again (twice at most)
      for (let attempt = 1;; attempt++) {
        try {
          await timedBuild(home, [TPL]);
          break;
        } catch (e) {
          if (attempt === 3) throw e;
          const why = (e instanceof Error ? e.message : String(e)).trim().split("\n").pop();
          say(`build attempt ${attempt} failed (${why}); trying again`);
        }
      }
    }
    const place = { bridge: LIVE_BRIDGE, ports: { tls: ports.tls, forward: ports.forward } };
    if (PART !== "rebuild") await branchPart(client, home, place, made);
  } finally {
    if (proxyUp) await home.isx(["proxy", "stop"]);
    await destroy(client, made);
    client.close();
    await closeLiveLab();
  }
}
