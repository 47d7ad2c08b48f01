// deno-lint-ignore-file no-console
/**
 * Delegate-to-first-model-request latency on a held instance (issue 10's benchmark): the time
 * from sending `delegate` over stdio to the real `isx mcp` until the scripted Anthropic mock
 * on the host sees Claude Code's first model call through the real proxy, in a copy of
 * `tpl-agents` that isx mcp created and the agents lab pointed at its proxy and mocks.
 *
 * Baseline (`direct`): the same run started by hand, the way the lab does it (one exec of the
 * run script `agentRunScript` as agentuser), timed from the exec to the first model call: what
 * delegation costs on top of starting the runner is the ratio delegate/direct.
 *
 * Then (`--fresh N`, default 3; 0 skips it) the start on a fresh instance, air-gapped
 * (_fresh_start.ts): `delegate` with `template` and `delegate` to a held instance against
 * `isx branch` plus the runner started by hand, each to the agent's first event.
 *
 * Run: `deno run -A bench/delegate_bench.ts [--iterations 5] [--fresh 3]`. Needs a built
 * tpl-agents.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { call, connect, makeHome } from "../tests/helpers/mcp.ts";
import { AgentsLab, PROJECT } from "../tests/helpers/agents_lab.ts";
import { freshStart } from "./_fresh_start.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "5" },
    fresh: { type: "string", default: "3" },
  },
});
const N = Number(values.iterations);

class Skip extends Error {}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function firstCall(lab: AgentsLab, before: number, t0: number): Promise<number> {
  const end = Date.now() + 120_000;
  while (lab.anthropic.modelCalls().length === before) {
    if (Date.now() > end) throw new Error("no model call within 120 s");
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - t0;
}

const h = makeHome({ mcp: "templates: [tpl-agents]\n" });
const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
let lab: AgentsLab | undefined;
let instance = "";
// --iterations 0 skips the held-instance part
try {
  if (N === 0) throw new Skip();
  const made = await call(c, "create_instance", { template: "tpl-agents", purpose: "bench" });
  if (made.isError) throw new Error(`create_instance: ${JSON.stringify(made.content)}`);
  instance = String((made.structuredContent as Record<string, unknown>).instance);
  lab = await AgentsLab.open({ instance });
  await lab.pushLoginEnv();
  const viaDelegate: number[] = [];
  const direct: number[] = [];
  for (let i = 0; i < N + 1; i++) {
    // delegate: the call, the guest checks and runner push, the launch, the runner, claude
    let before = lab.anthropic.modelCalls().length;
    let t0 = performance.now();
    const r = await call(c, "delegate", {
      instance,
      agent: "claude",
      cwd: PROJECT,
      instruction: `bench ${i}`,
    });
    const task = String((r.structuredContent as Record<string, unknown>).task_id);
    const d = await firstCall(lab, before, t0);
    for (let k = 0; k < 4; k++) {
      const st = await call(c, "task_status", { task_id: task, wait_seconds: 120 });
      // a refusal (a stalled daemon) is read again; the run's end is what this waits for
      const state = (st.structuredContent as Record<string, unknown> | undefined)?.state;
      if (state !== undefined && state !== "running") break;
    }
    // direct: the run script by hand (the baseline)
    const id = `bench-${i}`;
    await lab.prepare(id, 1, `bench direct ${i}\n`);
    before = lab.anthropic.modelCalls().length;
    t0 = performance.now();
    const run = lab.run("claude", id, 1);
    const b = await firstCall(lab, before, t0);
    await run;
    if (i === 0) {
      console.log(`cold (first of each): delegate ${d.toFixed(0)} ms, direct ${b.toFixed(0)} ms`);
      continue;
    }
    viaDelegate.push(d);
    direct.push(b);
  }
  const md = median(viaDelegate), mb = median(direct);
  console.log(`delegate → first model request: median ${md.toFixed(0)} ms over ${N}`);
  console.log(`direct run script (baseline):   median ${mb.toFixed(0)} ms over ${N}`);
  console.log(`ratio delegate/direct: ${(md / mb).toFixed(2)}`);
} catch (e) {
  if (!(e instanceof Skip)) throw e;
} finally {
  if (instance) await call(c, "destroy_instance", { instance }).catch(() => {});
  await c.close();
  await lab?.[Symbol.asyncDispose]();
  await Deno.remove(h.dir, { recursive: true }).catch(() => {});
}
if (Number(values.fresh) > 0) await freshStart(Number(values.fresh));
