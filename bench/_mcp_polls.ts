// deno-lint-ignore-file no-console
/**
 * The task polls as an MCP client pays for them (tasks_bench.ts's second part): the real
 * `isx mcp` over stdio, an instance it created with one background task running, and per
 * iteration, interleaved, `task_status` of the task, `wait_any` of it with
 * `timeout_seconds: 0` (one probe tick) and a raw REST exec of `true` (the baseline). The
 * execs each tool call ran in the instance are counted from Incus's event stream.
 *
 * @module
 */

import { makeHome, mcpCommand } from "../tests/helpers/mcp.ts";
import { spawnProgram } from "../tests/helpers/spawn.ts";
import { countExecs } from "./_exec_counter.ts";

function stats(xs: number[]) {
  const s = [...xs].sort((p, q) => p - q);
  const at = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!;
  return { median: at(0.5), mean: xs.reduce((p, q) => p + q, 0) / xs.length, p90: at(0.9) };
}

/** Runs the MCP half of the bench and prints it. */
export async function mcpPolls(o: {
  iterations: number;
  template: string;
  raw: (instance: string) => Promise<void>;
}): Promise<void> {
  const home = makeHome({ mcp: `templates: [${o.template}]\n` });
  const { env } = mcpCommand(home);
  const p = spawnProgram(["mcp", "--no-preflight"], { env, prog: "isx", cwd: home.dir });
  let id = 0;
  const call = async (name: string, args: Record<string, unknown>) => {
    const my = ++id;
    await p.send({
      jsonrpc: "2.0",
      id: my,
      method: "tools/call",
      params: { name, arguments: args },
    });
    for (;;) {
      const m = await p.readJson(600_000);
      if (m.id !== my) continue;
      const r = m.result as Record<string, unknown>;
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
      return r.structuredContent as Record<string, unknown>;
    }
  };
  let instance = "";
  try {
    await p.send({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "tasks-bench", version: "1" },
      },
    });
    await p.readJson(60_000);
    await p.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    console.log(`\nisx mcp: creating an instance of ${o.template}…`);
    instance = String((await call("create_instance", { template: o.template })).instance);
    const task = String(
      (await call("exec", { instance, command: "sleep 3600", background: true })).task_id,
    );
    const ops: Record<string, () => Promise<void>> = {
      task_status: async () => {
        if ((await call("task_status", { task_id: task })).state !== "running") {
          throw new Error("task_status: not running");
        }
      },
      wait_any: async () => {
        const r = await call("wait_any", { task_ids: [task], timeout_seconds: 0 });
        if ((r.finished as string[]).length) throw new Error("wait_any: finished");
      },
      raw: () => o.raw(instance),
    };
    // execs per call, from Incus's side: 10 calls of each, one kind at a time
    const perCall: Record<string, number> = {};
    {
      await using counter = await countExecs(instance);
      for (const k of ["task_status", "wait_any"]) {
        const before = await counter.settle();
        for (let i = 0; i < 10; i++) await ops[k]!();
        perCall[k] = ((await counter.settle()) - before) / 10;
      }
    }
    for (const f of Object.values(ops)) for (let i = 0; i < 5; i++) await f();
    const times: Record<string, number[]> = { task_status: [], wait_any: [], raw: [] };
    const order = Object.keys(ops);
    for (let i = 0; i < o.iterations; i++) {
      for (let j = 0; j < order.length; j++) {
        const k = order[(i + j) % order.length]!;
        const t0 = performance.now();
        await ops[k]!();
        times[k]!.push(performance.now() - t0);
      }
    }
    const st = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, stats(v)]));
    console.log(`one poll through isx mcp vs a raw REST exec, ${o.iterations} iterations (ms):`);
    for (const [k, s] of Object.entries(st)) {
      console.log(
        `  ${k.padEnd(11)} median ${s.median.toFixed(2).padStart(7)}  mean ${
          s.mean.toFixed(2).padStart(7)
        }  p90 ${s.p90.toFixed(2).padStart(7)}${
          perCall[k] !== undefined ? `  execs/call ${perCall[k]!.toFixed(1)}` : ""
        }`,
      );
    }
    const r = (a: string) => (st[a]!.median / st.raw!.median).toFixed(2);
    console.log(`  task_status/raw ${r("task_status")}x  wait_any/raw ${r("wait_any")}x (medians)`);
  } finally {
    if (instance) await call("destroy_instance", { instance }).catch((e) => console.error(e));
    await p[Symbol.asyncDispose]();
    await Deno.remove(home.dir, { recursive: true }).catch(() => {});
  }
}
