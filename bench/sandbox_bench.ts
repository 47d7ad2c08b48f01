/**
 * Sandbox engine benchmarks against the real daemon (run by hand):
 *
 *   deno bench --allow-all --no-prompt bench/sandbox_bench.ts
 *
 * - `ensure-noop`: `sandbox.ensure` of an unchanged sandbox (target < 50 ms) against the
 *   baseline `incus config show NAME` (the cheapest CLI look at the same instance);
 * - `create-ready`: `sandbox.create` until ready (`running`) against the baseline
 *   `incus launch debian-base NAME` plus polling `/state` until Running.
 *
 * Deno prints each group's ratios against its baseline. Everything created is deleted.
 *
 * @module
 */

import { createIncusClient } from "../rpc/mod.ts";
import { createEngine } from "../rpc/sandbox/mod.ts";
import { parseSpec } from "../rpc/sandbox/spec/spec.ts";

const IMAGE = Deno.env.get("ISX_TEST_IMAGE") || "debian-base";
const incus = createIncusClient({
  socket: Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket",
});
const dir = await Deno.makeTempDir({ prefix: "isb-bench-" });
const engine = createEngine({
  incus,
  cwd: dir,
  env: { HOME: Deno.env.get("HOME") ?? "/root" },
  lockDir: `${dir}/lock`,
  isbStateDir: `${dir}/state`,
});
const tag = crypto.randomUUID().slice(0, 6);
const steady = `t-bench-${tag}`;
const created: string[] = [];
let seq = 0;

await engine.ensure({ spec: parseSpec({ container_name: steady, image: IMAGE }) });
created.push(steady);

async function incusCli(args: string[]): Promise<void> {
  const r = await new Deno.Command("incus", { args, stdout: "null", stderr: "piped" }).output();
  if (!r.success) {
    throw new TypeError(`incus ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
  }
}

async function waitRunning(name: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if ((await incus.getInstanceState(name)).status === "Running") return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new TypeError(`${name} never became Running`);
}

Deno.bench({
  name: "incus config show (CLI)",
  group: "ensure-noop",
  baseline: true,
  n: 20,
  warmup: 2,
  async fn() {
    await incusCli(["config", "show", steady]);
  },
});

Deno.bench({
  name: "sandbox.ensure, unchanged",
  group: "ensure-noop",
  n: 20,
  warmup: 2,
  async fn() {
    const r = await engine.ensure({ spec: parseSpec({ container_name: steady, image: IMAGE }) });
    if (r.report.applied.length > 0) throw new TypeError("ensure was not a no-op");
  },
});

Deno.bench({
  name: "incus launch + wait for Running",
  group: "create-ready",
  baseline: true,
  n: 3,
  warmup: 0,
  async fn(b) {
    const name = `t-bench-${tag}-l${seq++}`;
    created.push(name);
    b.start();
    await incusCli(["launch", IMAGE, name]);
    await waitRunning(name);
    b.end();
    await incusCli(["delete", "-f", name]);
  },
});

Deno.bench({
  name: "sandbox.create until ready",
  group: "create-ready",
  n: 3,
  warmup: 0,
  async fn(b) {
    const name = `t-bench-${tag}-c${seq++}`;
    created.push(name);
    b.start();
    await engine.create({ spec: parseSpec({ container_name: name, image: IMAGE }) });
    b.end();
    await engine.remove({ name, force: true });
  },
});

addEventListener("unload", () => {
  // Best effort: anything a failed iteration left behind.
  for (const name of created) {
    new Deno.Command("incus", { args: ["delete", "-f", name], stdout: "null", stderr: "null" })
      .outputSync();
  }
  incus.close();
  Deno.removeSync(dir, { recursive: true });
});
