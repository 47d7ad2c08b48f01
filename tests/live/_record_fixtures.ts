/**
 * Records the agents' native streams for the translator tests (run by hand, needs the
 * `tpl-agents` template): in an AgentsLab, each agent's own command line (agentLaunch) runs
 * a tool turn and then a resumed turn against the mocks, and its stdout is saved as
 * `guest/agents/testdata/<agent>-<run>.jsonl`.
 *
 *   deno run -A tests/live/_record_fixtures.ts [agent...]
 */

import { agentLaunch, type AgentName } from "../../guest/agents/mod.ts";
import { execRecorded } from "../../mcp/mod.ts";
import { AgentsLab, ensureTemplate } from "../helpers/agents_lab.ts";
import { closeLiveLab } from "../helpers/live.ts";

const OUT = new URL("../../guest/agents/testdata/", import.meta.url).pathname;
const AGENT = { uid: 1000, gid: 1000, home: "/home/agentuser", name: "agentuser" };

async function record(lab: AgentsLab, agent: AgentName): Promise<void> {
  const task = `rec-${agent}`;
  const dir = lab.taskDir(task);
  let session: string | undefined;
  for (const run of [1, 2]) {
    const prompt = run === 1
      ? `MOCK_WRITE_FILE /home/agentuser/rec-${agent}.txt recorded-${agent}\n`
      : "Second message: MOCK_CHECK\n";
    await lab.prepare(task, run, prompt);
    const launch = agentLaunch({
      agent,
      run,
      ...(session ? { session } : {}),
      ...(agent === "pi" ? { sessionFile: `${dir}/pi-session.jsonl` } : {}),
    });
    const r = await execRecorded(
      lab.incus,
      lab.name,
      ["bash", "-c", 'exec timeout 100 "$@" < "$PROMPT_FILE"', "record", ...launch.argv],
      {
        step: `record ${agent} ${run}`,
        user: AGENT,
        env: {
          ...lab.runEnv(),
          ISX_MCP_TASK: task,
          ...launch.env,
          PROMPT_FILE: `${dir}/prompt-${run}.md`,
        },
        cwd: AGENT.home,
      },
    );
    if (r.exitCode !== 0) throw new Error(`${agent} run ${run}: exit ${r.exitCode}: ${r.stderr}`);
    await Deno.writeTextFile(`${OUT}/${agent}-${run}.jsonl`, r.stdout);
    if (run === 1) {
      const lines = r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
      session = agent === "codex"
        ? lines.find((l) => l.type === "thread.started")?.thread_id
        : agent === "opencode"
        ? lines[0]?.sessionID
        : agent === "pi"
        ? lines.find((l) => l.type === "session")?.id
        : lines.find((l) => l.session_id)?.session_id;
    }
    // deno-lint-ignore no-console
    console.log(`${agent} run ${run}: ${r.stdout.length} bytes`);
  }
}

if (import.meta.main) {
  Deno.mkdirSync(OUT, { recursive: true });
  const agents =
    (Deno.args.length ? Deno.args : ["claude", "codex", "pi", "opencode"]) as AgentName[];
  try {
    await ensureTemplate(); // in this run's lab (tests/helpers/lab.ts)
    await using lab = await AgentsLab.open();
    for (const a of agents) await record(lab, a);
  } finally {
    await closeLiveLab();
  }
}
