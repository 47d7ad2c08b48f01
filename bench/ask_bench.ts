// deno-lint-ignore-file no-console
/**
 * What `ask` costs (issue 10): the wall time of `exec` with `ask` over stdio to the real
 * `isx mcp`, in a copy of `tpl-agents` that isx mcp created and the agents lab pointed at its
 * proxy and the scripted Anthropic mock (Claude Code, the default summary agent, one model
 * call through the real proxy).
 *
 * Baseline (`direct`): the same one-shot Claude Code answer started by hand, one exec as
 * agentuser of `claude -p --tools '' --no-session-persistence --model haiku` with the prompt
 * piped in: what isx adds on top of the agent's own call (the guest check and runner, the
 * foreground machinery, the fence) is the ratio ask/direct. `exec` alone (the same command,
 * no ask) is printed beside it.
 *
 * Run: `deno run -A bench/ask_bench.ts [--iterations 5]`. Needs a built tpl-agents.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { call, connect, makeHome } from "../tests/helpers/mcp.ts";
import { AgentsLab } from "../tests/helpers/agents_lab.ts";

const { values } = parseArgs({ options: { iterations: { type: "string", default: "5" } } });
const N = Number(values.iterations);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const COMMAND = "seq 1 2000; echo 'build failed: 3 errors' >&2; exit 1";

const h = makeHome({ mcp: "templates: [tpl-agents]\n" });
const c = await connect(h, "legacy", { extra: ["--no-preflight"] });
let lab: AgentsLab | undefined;
let instance = "";
try {
  const made = await call(c, "create_instance", { template: "tpl-agents", purpose: "bench" });
  instance = String((made.structuredContent as Record<string, unknown>).instance);
  lab = await AgentsLab.open({ instance });
  await lab.pushLoginEnv();
  const asked: number[] = [], direct: number[] = [], plain: number[] = [];
  for (let i = 0; i < N + 1; i++) {
    let t0 = performance.now();
    const r = await call(c, "exec", { instance, command: COMMAND, ask: `What failed? (${i})` });
    if (r.isError) throw new Error(JSON.stringify(r.content));
    const a = performance.now() - t0;
    t0 = performance.now();
    await call(c, "exec", { instance, command: COMMAND });
    const p = performance.now() - t0;
    t0 = performance.now();
    const d = await lab.user(
      `. /etc/profile >/dev/null 2>&1; { ${COMMAND}; } 2>&1 | { cat; echo 'What failed? (${i})'; } | ` +
        `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 claude -p --output-format stream-json --verbose ` +
        `--tools '' --no-session-persistence --model haiku >/dev/null`,
      lab.runEnv(),
    );
    const b = performance.now() - t0;
    if (d.exitCode !== 0) throw new Error(`direct claude: ${d.stderr}`);
    if (i === 0) {
      console.log(`cold (first of each): ask ${a.toFixed(0)} ms, direct ${b.toFixed(0)} ms`);
      continue;
    }
    asked.push(a), direct.push(b), plain.push(p);
  }
  const ma = median(asked), mb = median(direct);
  console.log(`exec with ask:                median ${ma.toFixed(0)} ms over ${N}`);
  console.log(`direct claude -p (baseline):  median ${mb.toFixed(0)} ms over ${N}`);
  console.log(`exec alone (no ask):          median ${median(plain).toFixed(0)} ms over ${N}`);
  console.log(`ratio ask/direct: ${(ma / mb).toFixed(2)}`);
} finally {
  if (instance) await call(c, "destroy_instance", { instance }).catch(() => {});
  await c.close();
  await lab?.[Symbol.asyncDispose]();
  await Deno.remove(h.dir, { recursive: true }).catch(() => {});
}
