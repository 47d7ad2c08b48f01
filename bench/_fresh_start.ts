// deno-lint-ignore-file no-console
/**
 * Delegate to the agent's start on a fresh instance (delegate_bench.ts's second part), in
 * three ways, air-gapped so no agent reaches any network (a user-layer `tpl-agents` with
 * `network: airgap`: the same definition hash, so the same built template):
 *
 * - fresh:   `delegate` with `template` through the real `isx mcp` (capacity check, copy,
 *            guest preparation, launch);
 * - held:    `delegate` to an instance the session already holds;
 * - branch:  the baseline: `isx branch NAME --from tpl-agents --network airgap` (the real CLI)
 *            and then the runner started by hand (prepareGuest, then the engine's launch of
 *            the same run script).
 *
 * Each is timed from the call to the run's launch (the call's answer; for the baseline, the
 * engine's launch returned) and to the agent's first event in its events log (Claude's
 * `system/init`, polled every 100 ms). Without a network Claude waits on failing look-ups
 * before that event, a constant of the agent that part one (a held instance with the lab's
 * mock model) does not have; the launch times are what isx adds.
 *
 * @module
 */

import { agentRunScript } from "../guest/mod.ts";
import { createIncusClient } from "../rpc/mod.ts";
import { SLOW_DAEMON_MS } from "../mcp/mod.ts";
import { createTaskEngine } from "../mcp/tasks/mod.ts";
import {
  AGENT_USER,
  GUEST_DENO,
  prepareGuest,
  RUNNER_DIR,
  taskDir,
} from "../mcp/delegate/guest.ts";
import { DELEGATE_BRIEF } from "../mcp/delegate/report.ts";
import { BUILTIN_TEMPLATES } from "../mcp/templates/builtin.ts";
import { call, connect, makeHome } from "../tests/helpers/mcp.ts";
import { ROOT } from "../tests/helpers/spawn.ts";
import { removeInstance } from "../tests/helpers/incus_wait.ts";

const TPL = "tpl-agents";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Runs the fresh/held/branch comparison `n` times (after one cold round) and prints it. */
export async function freshStart(n: number): Promise<void> {
  const incus = createIncusClient({ timeouts: { requestMs: SLOW_DAEMON_MS } });
  const engine = createTaskEngine({ incus });
  const h = makeHome({ mcp: `templates: [${TPL}]\nmax-instances: 20\n` });
  Deno.mkdirSync(`${h.configDir}/templates`, { recursive: true });
  Deno.writeTextFileSync(
    `${h.configDir}/templates/${TPL}.yaml`,
    `${BUILTIN_TEMPLATES[TPL]}network: airgap\n`,
  );
  const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
  const made: string[] = [];
  const branched: string[] = [];
  const sc = (r: Record<string, unknown>) => {
    if (r.isError) throw new Error(JSON.stringify(r.content));
    return r.structuredContent as Record<string, unknown>;
  };
  /** ms from t0 until the task's events log has a line. */
  const firstEvent = async (instance: string, task: string, t0: number) => {
    const f = `${taskDir(task)}/events-1.jsonl`;
    const end = Date.now() + 180_000;
    for (;;) {
      // a poll the loaded daemon did not answer is just not an answer yet
      const r = await incus.execCapture(instance, ["test", "-s", f]).catch(() => undefined);
      if (r?.exitCode === 0) return performance.now() - t0;
      if (Date.now() > end) throw new Error(`no event from ${task} in ${instance}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  try {
    const held = String(sc(await call(c, "create_instance", { template: TPL })).instance);
    made.push(held);
    const t = { fresh: [] as number[], held: [] as number[], branch: [] as number[] };
    const l = { fresh: [] as number[], held: [] as number[], branch: [] as number[] };
    for (let i = 0; i < n + 1; i++) {
      // fresh: delegate with template
      let t0 = performance.now();
      let r = sc(await call(c, "delegate", { template: TPL, instruction: `bench ${i}` }));
      const freshL = performance.now() - t0;
      made.push(String(r.instance));
      const fresh = await firstEvent(String(r.instance), String(r.task_id), t0);
      await call(c, "destroy_instance", { instance: String(r.instance) });
      // held: delegate to the held instance, its run cancelled once timed
      t0 = performance.now();
      r = sc(await call(c, "delegate", { instance: held, instruction: `bench ${i}` }));
      const heldL = performance.now() - t0;
      const hd = await firstEvent(held, String(r.task_id), t0);
      await call(c, "cancel_task", { task_id: String(r.task_id) });
      // baseline: isx branch, then the runner by hand
      const name = `dkb-${crypto.randomUUID().slice(0, 6)}`;
      branched.push(name);
      t0 = performance.now();
      const out = await new Deno.Command(`${ROOT}/bin/isx`, {
        args: ["branch", name, "--from", TPL, "--network", "airgap", "--no-preflight"],
        env: h.env,
        cwd: h.dir,
        stdout: "null",
        stderr: "piped",
      }).output();
      if (!out.success) throw new Error(`isx branch: ${new TextDecoder().decode(out.stderr)}`);
      const cwd = await prepareGuest(incus, name, AGENT_USER.home);
      const task = `t1-dkb${i}`;
      await engine.launch(name, {
        taskId: task,
        run: 1,
        kind: "agent",
        script: agentRunScript({
          deno: GUEST_DENO,
          scripts: RUNNER_DIR,
          dir: taskDir(task),
          run: 1,
          agent: "claude",
          home: AGENT_USER.home,
          task,
          cwd,
        }),
        prompt: `bench ${i}\n`,
        files: { agent: "claude\n", cwd: `${cwd}\n`, "brief.md": DELEGATE_BRIEF },
      });
      const branchL = performance.now() - t0;
      const br = await firstEvent(name, task, t0);
      await removeInstance(incus, name);
      const ms = (a: number, b: number) => `${a.toFixed(0)}/${b.toFixed(0)} ms`;
      const line = `launched/first event: fresh ${ms(freshL, fresh)}, held ${
        ms(heldL, hd)
      }, branch+hand ${ms(branchL, br)}`;
      if (i === 0) {
        console.log(`cold (first round): ${line}`);
        continue;
      }
      console.log(`round ${i}: ${line}`);
      t.fresh.push(fresh);
      t.held.push(hd);
      t.branch.push(br);
      l.fresh.push(freshL);
      l.held.push(heldL);
      l.branch.push(branchL);
    }
    for (const [what, x] of [["the run's launch", l], ["the agent's first event", t]] as const) {
      const [f, hm, b] = [median(x.fresh), median(x.held), median(x.branch)];
      console.log(`call → ${what} (air-gapped), medians over ${n}:`);
      console.log(`  delegate(template), fresh instance:     ${f.toFixed(0)} ms`);
      console.log(`  delegate(instance), held instance:      ${hm.toFixed(0)} ms`);
      console.log(`  isx branch + runner by hand (baseline): ${b.toFixed(0)} ms`);
      console.log(
        `  ratio fresh/branch+hand ${(f / b).toFixed(2)}  held/branch+hand ${(hm / b).toFixed(2)}`,
      );
    }
  } finally {
    for (const m of made) await call(c, "destroy_instance", { instance: m }).catch(() => {});
    await c.close();
    for (const b of branched) await removeInstance(incus, b).catch(() => {});
    for (const m of made) await removeInstance(incus, m).catch(() => {});
    incus.close();
    await Deno.remove(h.dir, { recursive: true }).catch(() => {});
  }
}
