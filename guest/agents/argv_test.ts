import assert from "node:assert/strict";
import { agentRunnerArgv, agentRunScript, diffRunnerArgv } from "./mod.ts";
import { parseRunnerArgs } from "./main.ts";

const PLACE = {
  deno: "/usr/local/bin/deno",
  scripts: "/opt/isx-runner",
  dir: "/home/agentuser/.isx-mcp/tasks/t1-abcd",
  run: 2,
  agent: "codex" as const,
  home: "/home/agentuser",
};

Deno.test("agentRunnerArgv grants the task directory and the one agent, no network", () => {
  const argv = agentRunnerArgv(PLACE);
  assert.ok(argv.includes(`--allow-write=${PLACE.dir}`));
  assert.ok(argv.includes("--allow-run=codex"));
  assert.ok(!argv.some((a) => a.startsWith("--allow-net") || a === "--allow-all" || a === "-A"));
  assert.deepEqual(argv.slice(-6), ["--dir", PLACE.dir, "--run", "2", "--agent", "codex"]);
  assert.throws(() => agentRunnerArgv({ ...PLACE, dir: "/tmp/../etc" }), /invalid task directory/);
  assert.throws(() => agentRunnerArgv({ ...PLACE, dir: "/tmp/x y" }), /invalid task directory/);
});

Deno.test("agentRunScript quotes every value and keeps a cancel's exit", async () => {
  const s = agentRunScript({ ...PLACE, task: "t1-abcd" });
  assert.match(s, /^export ISX_MCP_TASK=t1-abcd\n/);
  assert.match(s, /'--allow-run=codex'/);
  assert.match(s, /ln '.*'\/\.exit-2\.sh-tmp '.*'\/exit-2/, "a link: an existing exit is kept");
  assert.throws(() => agentRunScript({ ...PLACE, task: "t1;rm -rf" }), /invalid task id/);
  // the script is valid bash
  const p = await new Deno.Command("bash", { args: ["-n"], stdin: "piped" }).spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(s));
  await w.close();
  assert.equal((await p.status).code, 0);
});

Deno.test("agentRunnerArgv and parseRunnerArgs carry the ask mode, run 1 only", () => {
  const argv = agentRunnerArgv({ ...PLACE, run: 1, mode: "ask" });
  assert.deepEqual(argv.slice(-2), ["--mode", "ask"]);
  const args = argv.slice(argv.findIndex((a) => a.endsWith("/agents/main.ts")) + 1);
  assert.deepEqual(parseRunnerArgs(args), { dir: PLACE.dir, run: 1, agent: "codex", mode: "ask" });
  assert.equal(parseRunnerArgs(args.slice(0, -2)).mode, "task");
  assert.throws(() => parseRunnerArgs([...args.slice(0, 3), "2", ...args.slice(4)]), /--mode/);
  assert.throws(() => parseRunnerArgs([...args.slice(0, -1), "shell"]), /--mode must be/);
});

Deno.test("agentRunnerArgv and diffRunnerArgv start deno with its release check off", () => {
  for (
    const argv of [
      agentRunnerArgv(PLACE),
      agentRunnerArgv({ ...PLACE, mode: "ask" }),
      diffRunnerArgv(PLACE, { sub: "record", cwd: "/home/agentuser/proj" }),
      diffRunnerArgv(PLACE, { sub: "diff" }),
    ]
  ) {
    assert.deepEqual(argv.slice(0, 4), [
      "/usr/bin/env",
      "DENO_NO_UPDATE_CHECK=1",
      PLACE.deno,
      "run",
    ]);
  }
});
