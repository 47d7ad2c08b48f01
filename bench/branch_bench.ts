/**
 * Benchmarks of the isx host layer, run by hand against a real incusd (btrfs pool):
 *
 * 1. `isx branch` (the library call, and the CLI process) to a running instance with an
 *    IPv4 address, against two bare baselines: `incus copy` + `incus start` (CLI processes)
 *    and the same copy and start as raw REST calls in one process. Both wait for the address
 *    the way `isx branch` does, a `GET /1.0/instances/NAME/state` every 25 ms over the
 *    socket (no `incus list` process per poll, whose Go start-ups loaded the 2-core host
 *    while the guest booted). Target: within 1.2x of the baseline and under 1.5 s.
 * 2. A rebuild of a template with apt packages and an npm tool with a warm download cache
 *    against the same build with a cold one.
 *
 *   deno run -A bench/branch_bench.ts [rounds=5] [branch|rebuild|all]
 *
 * Without the rebuild part, the template is a plain copy of the image (no build).
 *
 * @module
 */

import { createIncusClient, type IncusClient } from "../rpc/mod.ts";
import { branchInstance, SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { IsxHome } from "../tests/templates_env.ts";

const ROUNDS = Number(Deno.args[0] ?? 5);
const PART = Deno.args[1] ?? "all";
const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const tag = crypto.randomUUID().slice(0, 6);
const TPL = `t-bench-${tag}`;

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
  await must("incus", ["copy", TPL, name, "--instance-only"]);
  await must("incus", ["start", name]);
  await waitIpv4(client, name);
  return performance.now() - t;
}

/** The same copy and start as REST calls in this process, then the address. */
async function baselineRest(client: IncusClient, name: string): Promise<number> {
  const t = performance.now();
  const copy = await client.call("POST", "/1.0/instances", {
    body: { name, source: { type: "copy", source: TPL, instance_only: true } },
  });
  if (copy.kind === "async") await client.waitOperation(copy, { step: `copy ${TPL} to ${name}` });
  await client.startInstance(name, { step: `start ${name}` });
  await waitIpv4(client, name);
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

async function destroy(names: string[]): Promise<void> {
  for (const n of names) await sh("incus", ["delete", "-f", n]);
}

async function timedBuild(home: IsxHome, args: string[]): Promise<number> {
  const t = performance.now();
  const r = await home.isx(["build", "-q", ...args]);
  if (r.code !== 0) throw new Error(r.stdout + r.stderr);
  return performance.now() - t;
}

/** Part 1: the branch timings, medians of ROUNDS rounds. */
async function branchPart(client: IncusClient, cold: IsxHome, made: string[]): Promise<void> {
  const baseCli: number[] = [];
  const baseRest: number[] = [];
  const lib: number[] = [];
  const cli: number[] = [];
  // each step's milliseconds (BranchResult.steps; the CLI's --json adds its own), by variant
  const libSteps = new Map<string, number[]>();
  const cliSteps = new Map<string, number[]>();
  const keep = (into: Map<string, number[]>, steps: Record<string, number>) => {
    for (const [k, v] of Object.entries(steps)) into.set(k, [...into.get(k) ?? [], v]);
  };
  let failures = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const b = `${TPL}-b${i}`, r = `${TPL}-r${i}`, l = `${TPL}-l${i}`, c = `${TPL}-c${i}`;
    made.push(b, r, l, c);
    // the order turns each round, so a drifting daemon weighs on every variant alike
    const runs: (() => Promise<void>)[] = [
      async () => void baseCli.push(await baselineCli(client, b)),
      async () => void baseRest.push(await baselineRest(client, r)),
      async () => {
        const t = performance.now();
        const res = await branchInstance(client, {
          name: l,
          template: TPL,
          proxy: { bridge: "incusbr0" },
        });
        lib.push(performance.now() - t);
        keep(libSteps, res.steps);
      },
      async () => {
        const t = performance.now();
        const res = await cold.isx(["branch", c, "--from", TPL, "--no-preflight", "--json"]);
        if (res.code !== 0) throw new Error(res.stderr);
        cli.push(performance.now() - t);
        keep(cliSteps, JSON.parse(res.stdout).steps);
      },
    ];
    for (let k = 0; k < runs.length; k++) {
      // a run the shared daemon stalls is counted and left out, not the end of the benchmark
      await runs[(k + i) % runs.length]!().catch((e) => {
        failures++;
        say(`a run failed: ${e instanceof Error ? e.message : e}`);
      });
    }
    await destroy([b, r, l, c]);
  }
  const mc = median(baseCli), mr = median(baseRest);
  const vs = (ms: number) =>
    `(${(ms / mc).toFixed(2)}x CLI baseline, ${(ms / mr).toFixed(2)}x REST baseline)`;
  say(`medians of ${ROUNDS} rounds; the address is polled by a state GET every 25 ms`);
  say(`baseline incus copy + start (CLI) + wait for IPv4:   ${fmt(mc)}`);
  say(`baseline copy + start as REST calls + wait for IPv4: ${fmt(mr)}`);
  say(`isx branch, library call: ${fmt(median(lib))}  ${vs(median(lib))}`);
  say(`isx branch, CLI process:  ${fmt(median(cli))}  ${vs(median(cli))}`);
  const stepLine = (m: Map<string, number[]>) =>
    [...m].map(([k, v]) => `${k} ${median(v).toFixed(0)}`).join(", ") + " ms";
  say(`  library call, each step (median): ${stepLine(libSteps)}`);
  const cliSum = [...cliSteps].filter(([k]) => !k.includes("overlapped"))
    .reduce((a, [, v]) => a + median(v), 0);
  say(`  CLI process, each step (median): ${stepLine(cliSteps)}`);
  // medians of separate runs need not add up to the total's median
  say(`  (the CLI's step medians add up to ${fmt(cliSum)}; the rest is start-up and exit)`);
  if (failures) say(`(${failures} runs failed and were left out)`);
}

if (import.meta.main) {
  const made: string[] = [TPL, `${TPL}-build`];
  await using cold = new IsxHome();
  const client = createIncusClient({ timeouts: { requestMs: SLOW_DAEMON_MS } });
  try {
    await cold.isx(["init", "--yes"]);
    if (PART !== "branch") {
      cold.define("templates", TPL, `image: ${IMAGE}\npackages: [jq, make]\ntools: [node]\n`);
      const coldMs = await timedBuild(cold, [TPL]);
      const warmMs = await timedBuild(cold, [TPL]);
      say(`rebuild, download cache cold: ${fmt(coldMs)}`);
      say(
        `rebuild, download cache warm: ${fmt(warmMs)}  (${(warmMs / coldMs).toFixed(2)}x of cold)`,
      );
    } else {
      cold.define("templates", TPL, `image: ${IMAGE}\n`);
      // the shared daemon stalls at times; a build it stalls is tried again (twice at most)
      for (let attempt = 1;; attempt++) {
        try {
          await timedBuild(cold, [TPL]);
          break;
        } catch (e) {
          if (attempt === 3) throw e;
          const why = (e instanceof Error ? e.message : String(e)).trim().split("\n").pop();
          say(`build attempt ${attempt} failed (${why}); trying again`);
        }
      }
    }
    if (PART !== "rebuild") await branchPart(client, cold, made);
  } finally {
    client.close();
    await destroy(made);
  }
}
