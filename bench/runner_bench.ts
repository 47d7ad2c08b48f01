// deno-lint-ignore-file no-console
/**
 * Guest runner start time: what the agent runner (guest/agents, `deno run` with its own
 * grants, through `run-<n>.sh`) adds to one agent run, measured inside a copy of
 * `tpl-agents` so Incus exec costs stay out of the figures. The agent is a stand-in
 * `claude` on the PATH that reads its prompt and prints a Claude-shaped init and result, so
 * only start-up and the task files are timed.
 *
 * - runner: `bash run-1.sh` (agentRunScript): deno starts, reads the task files, spawns the
 *   stand-in, translates its stream, writes events, session and exit;
 * - direct (the baseline): the stand-in run by bash with the prompt on stdin, output to a
 *   file: what a plain run script does without a runner;
 * - deno: `deno run` of an empty script, the part of the runner's time that is deno's own.
 *
 * - bundled: the same with the runner as one `deno bundle` JavaScript file instead of its
 *   TypeScript files (what a bundled delivery would save).
 *
 * The first run of each (deno compiling and caching the runner) is reported apart as `cold`.
 * Run: `deno run -A bench/runner_bench.ts [--iterations 30] [--template tpl-agents]`.
 * Prints median/mean/p90 per variant and the ratio runner/direct.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { createIncusClient } from "../rpc/mod.ts";
import { execRecorded } from "../mcp/mod.ts";
import { AGENT_RUNNER_FILES, agentRunScript, readAgentRunnerFile } from "../guest/mod.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "30" },
    template: { type: "string", default: "tpl-agents" },
    socket: { type: "string", default: "/var/lib/incus/unix.socket" },
  },
});
const N = Number(values.iterations);
const name = `bench-runner-${crypto.randomUUID().slice(0, 8)}`;
const client = createIncusClient({ socket: values.socket, timeouts: { requestMs: 120_000 } });
const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };
const SCRIPTS = "/opt/isx-runner";
const STUB = `#!/bin/sh
cat >/dev/null
echo '{"type":"system","subtype":"init","session_id":"9c3f0000-0000-4000-8000-000000000001"}'
echo '{"type":"assistant","message":{"content":[{"type":"text","text":"ok"}]}}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","num_turns":1,"total_cost_usd":0.01,"usage":{"input_tokens":1,"output_tokens":1}}'
`;

async function root(script: string): Promise<string> {
  const r = await execRecorded(client, name, ["bash", "-c", script], { step: "bench" });
  if (r.exitCode !== 0) throw new TypeError(`${script}: ${r.stdout}${r.stderr}`);
  return r.stdout;
}

function stats(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { median: s[Math.floor(s.length / 2)]!, mean, p90: s[Math.floor(s.length * 0.9)]! };
}

try {
  await client.createInstance({
    name,
    source: { type: "copy", source: values.template, instance_only: true },
    start: true,
  }, { step: `copy ${values.template}` });
  await root(`mkdir -p ${SCRIPTS}/agents ${SCRIPTS}/diff /opt/stub`);
  for (const f of AGENT_RUNNER_FILES) {
    await client.pushFile(name, `${SCRIPTS}/${f}`, await readAgentRunnerFile(f), {
      step: f,
      mode: 0o644,
    });
  }
  await client.pushFile(name, "/opt/stub/claude", STUB, { step: "stub", mode: 0o755 });
  await client.pushFile(name, "/opt/stub/empty.js", "\n", { step: "empty", mode: 0o644 });
  const bundle = await Deno.makeTempFile({ suffix: ".js" });
  const b = await new Deno.Command(Deno.execPath(), {
    args: ["bundle", "--quiet", "--platform=deno", "-o", bundle, "guest/agents/main.ts"],
    cwd: new URL("..", import.meta.url).pathname,
  }).output();
  if (!b.success) throw new TypeError(`deno bundle: ${new TextDecoder().decode(b.stderr)}`);
  await client.pushFile(name, `${SCRIPTS}/runner.js`, await Deno.readTextFile(bundle), {
    step: "bundle",
    mode: 0o644,
  });
  await Deno.remove(bundle);
  // one script; each iteration's copy names its own task (a placeholder replaced by sed)
  const script = agentRunScript({
    deno: "/usr/local/bin/deno",
    scripts: SCRIPTS,
    dir: `${AGENT.home}/.isx-mcp/tasks/zzbenchzz`,
    run: 1,
    agent: "claude",
    home: AGENT.home,
    task: "zzbenchzz",
  });
  await client.pushFile(name, "/opt/stub/run.sh", script, { step: "script", mode: 0o644 });
  // one guest process times every iteration, runner and direct alternating
  const loop = `
set -e
export PATH=/opt/stub:/usr/local/bin:/usr/bin:/bin HOME=${AGENT.home}
ms() { echo $(( ($(date +%s%N) - $1) / 1000 )); }
for i in $(seq 0 ${N}); do
  d=${AGENT.home}/.isx-mcp/tasks/b$i; mkdir -p "$d"; echo "do it" > "$d/prompt-1.md"
  sed "s/zzbenchzz/b$i/g" /opt/stub/run.sh > "$d/run-1.sh"
  t=$(date +%s%N); bash "$d/run-1.sh"; echo "runner $i $(ms $t)"
  grep -q '"is_error":false' "$d/events-1.jsonl"; [ "$(cat "$d/exit-1")" = 0 ]
  d=${AGENT.home}/.isx-mcp/tasks/c$i; mkdir -p "$d"; echo "do it" > "$d/prompt-1.md"
  sed "s/zzbenchzz/c$i/g; s#${SCRIPTS}/agents/main.ts#${SCRIPTS}/runner.js#" /opt/stub/run.sh > "$d/run-1.sh"
  t=$(date +%s%N); bash "$d/run-1.sh"; echo "bundled $i $(ms $t)"
  grep -q '"is_error":false' "$d/events-1.jsonl"; [ "$(cat "$d/exit-1")" = 0 ]
  t=$(date +%s%N); claude -p < "$d/prompt-1.md" > "$d/direct.jsonl"; echo "direct $i $(ms $t)"
  t=$(date +%s%N); deno run --no-config --no-lock --quiet /opt/stub/empty.js; echo "deno $i $(ms $t)"
done`;
  const r = await execRecorded(client, name, ["bash", "-c", loop], {
    step: "loop",
    user: AGENT,
    deadlineMs: 1_800_000,
  });
  if (r.exitCode !== 0) throw new TypeError(`loop: ${r.stdout}${r.stderr}`);
  const runs: Record<string, number[]> = { runner: [], bundled: [], direct: [], deno: [] };
  const cold: Record<string, number> = {};
  for (const line of r.stdout.trim().split("\n")) {
    const [kind, i, us] = line.split(" ");
    const msv = Number(us) / 1000;
    if (i === "0") cold[kind!] = msv;
    else runs[kind!]!.push(msv);
  }
  const run = stats(runs.runner!);
  const bun = stats(runs.bundled!);
  const direct = stats(runs.direct!);
  const deno = stats(runs.deno!);
  const f = (x: number) => x.toFixed(1).padStart(8);
  console.log(`guest runner start (${N} iterations, ${values.template}), ms:`);
  console.log(`            median     mean      p90`);
  console.log(`runner    ${f(run.median)} ${f(run.mean)} ${f(run.p90)}`);
  console.log(`bundled   ${f(bun.median)} ${f(bun.mean)} ${f(bun.p90)}`);
  console.log(`direct    ${f(direct.median)} ${f(direct.mean)} ${f(direct.p90)}   (baseline)`);
  console.log(`deno      ${f(deno.median)} ${f(deno.mean)} ${f(deno.p90)}   (an empty script)`);
  console.log(
    `cold (first run, deno caching the runner): runner ${cold.runner?.toFixed(1)} ms, ` +
      `bundled ${cold.bundled?.toFixed(1)} ms`,
  );
  console.log(`ratio bundled/direct (median): ${(bun.median / direct.median).toFixed(2)}x`);
  console.log(`ratio runner/deno-empty (median): ${(run.median / deno.median).toFixed(2)}x`);
  console.log(
    `ratio runner/direct (median): ${(run.median / direct.median).toFixed(2)}x, ` +
      `runner overhead ${(run.median - direct.median).toFixed(1)} ms`,
  );
} finally {
  await client.stopInstance(name, { step: "stop", force: true }).catch(() => {});
  await client.deleteInstance(name, { step: "delete" }).catch(() => {});
  client.close();
}
