/**
 * Benchmarks of the isx host layer, run by hand against a real incusd (btrfs pool):
 *
 * 1. `isx branch` (the library call, and the CLI process) to a running instance with an
 *    IPv4 address, against the bare baseline `incus copy` + `incus start` + polling
 *    `incus list` for the address. Target: within 1.2x of the baseline and under 1.5 s.
 * 2. A rebuild of a template with apt packages and an npm tool with a warm download cache
 *    against the same build with a cold one.
 *
 *   deno run -A bench/branch_bench.ts [rounds=5]
 *
 * @module
 */

import { createIncusClient } from "../rpc/mod.ts";
import { branchInstance, SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { IsxHome } from "../tests/templates_env.ts";

const ROUNDS = Number(Deno.args[0] ?? 5);
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

async function baseline(name: string): Promise<number> {
  const t = performance.now();
  await must("incus", ["copy", TPL, name, "--instance-only"]);
  await must("incus", ["start", name]);
  for (;;) {
    const ip = (await must("incus", ["list", name, "-c", "4", "-f", "csv"])).trim();
    if (ip) break;
    await new Promise((r) => setTimeout(r, 25));
  }
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

if (import.meta.main) {
  const made: string[] = [TPL, `${TPL}-build`];
  await using cold = new IsxHome();
  const client = createIncusClient({ timeouts: { requestMs: SLOW_DAEMON_MS } });
  try {
    await cold.isx(["init", "--yes"]);
    cold.define("templates", TPL, `image: ${IMAGE}\npackages: [jq, make]\ntools: [node]\n`);
    const coldMs = await timedBuild(cold, [TPL]);
    const warmMs = await timedBuild(cold, [TPL]);
    say(`rebuild, download cache cold: ${fmt(coldMs)}`);
    say(`rebuild, download cache warm: ${fmt(warmMs)}  (${(warmMs / coldMs).toFixed(2)}x of cold)`);

    const base: number[] = [];
    const lib: number[] = [];
    const cli: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const b = `${TPL}-b${i}`, l = `${TPL}-l${i}`, c = `${TPL}-c${i}`;
      made.push(b, l, c);
      base.push(await baseline(b));
      const t = performance.now();
      await branchInstance(client, { name: l, template: TPL, proxy: { bridge: "incusbr0" } });
      lib.push(performance.now() - t);
      const t2 = performance.now();
      const r = await cold.isx(["branch", c, "--from", TPL, "--no-preflight"]);
      if (r.code !== 0) throw new Error(r.stderr);
      cli.push(performance.now() - t2);
      await destroy([b, l, c]);
    }
    const mb = median(base);
    say(`baseline incus copy + start + wait for IPv4 (median of ${ROUNDS}): ${fmt(mb)}`);
    say(
      `isx branch, library call: ${fmt(median(lib))}  (${(median(lib) / mb).toFixed(2)}x baseline)`,
    );
    say(
      `isx branch, CLI process:  ${fmt(median(cli))}  (${(median(cli) / mb).toFixed(2)}x baseline)`,
    );
  } finally {
    client.close();
    await destroy(made);
  }
}
