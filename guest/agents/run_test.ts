import assert from "node:assert/strict";
import { runAgent } from "./mod.ts";

const SID = "9c3f0000-0000-4000-8000-000000000001";

/** A task directory with run n's prompt, and a stand-in agent program running `script`. */
async function task(run: number, script: string, files: Record<string, string> = {}) {
  const dir = await Deno.makeTempDir({ prefix: "isx-run-test-" });
  await Deno.writeTextFile(`${dir}/prompt-${run}.md`, "hello prompt\n");
  for (const [k, v] of Object.entries(files)) await Deno.writeTextFile(`${dir}/${k}`, v);
  const program = `${dir}/agent.sh`;
  await Deno.writeTextFile(program, `#!/bin/bash\n${script}\n`, { mode: 0o755 });
  return { dir, program };
}

const read = (p: string) => Deno.readTextFile(p).catch(() => undefined);

Deno.test("runAgent pipes the prompt, translates the stream, records session and exit", async () => {
  const { dir, program } = await task(
    1,
    `cat > "$(dirname "$0")/stdin.txt"
     echo '{"type":"system","subtype":"init","session_id":"${SID}"}'
     echo 'not json'
     echo '{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}'
     printf '{"type":"result","subtype":"success","is_error":false,"result":"done","num_turns":1}'`,
  );
  try {
    const out = await runAgent({ dir, run: 1, agent: "claude", cwd: dir, home: dir, program });
    assert.equal(out.exitCode, 0);
    assert.equal(await read(`${dir}/stdin.txt`), "hello prompt\n", "the prompt went to stdin");
    const events = (await read(`${dir}/events-1.jsonl`))!.trim().split("\n").map((l) =>
      JSON.parse(l)
    );
    assert.deepEqual(events.map((e) => e.type), ["system", "assistant", "result"]);
    assert.equal(events[2].result, "done");
    assert.equal(await read(`${dir}/session_id`), `${SID}\n`);
    assert.equal(await read(`${dir}/exit-1`), "0\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runAgent: a silent failure reports the stderr tail; a cancel's exit stays", async () => {
  const { dir, program } = await task(1, `echo 'model unreachable' >&2; exit 1`, {
    "exit-1": "143\n",
  });
  try {
    const out = await runAgent({ dir, run: 1, agent: "claude", cwd: dir, home: dir, program });
    assert.equal(out.exitCode, 1);
    assert.equal(out.result.is_error, true);
    assert.match(out.result.result, /model unreachable/);
    assert.equal(await read(`${dir}/exit-1`), "143\n", "the first exit written wins");
    assert.equal(await read(`${dir}/stderr-1.log`), "model unreachable\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runAgent refuses before starting the agent: unsaved pi session, bad model", async () => {
  const { dir, program } = await task(2, `touch "$(dirname "$0")/ran"`, {
    session_id: "01a231e7-a8fb-7000-8000-000000000003\n",
  });
  try {
    const pi = await runAgent({ dir, run: 2, agent: "pi", cwd: dir, home: dir, program });
    assert.equal(pi.exitCode, 2);
    assert.match(pi.result.result, /is not saved/);
    await Deno.remove(`${dir}/exit-2`);
    const bad = await runAgent({
      dir,
      run: 2,
      agent: "claude",
      cwd: dir,
      home: dir,
      program,
      model: "--dangerously-skip-permissions",
    });
    assert.match(bad.result.result, /invalid model/);
    assert.equal(await read(`${dir}/ran`), undefined, "the agent never ran");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runAgent one-shot (ask) answers with the agent's args and keeps no session", async () => {
  for (const agent of ["claude", "pi"] as const) {
    const line = agent === "claude"
      ? `echo '{"type":"system","subtype":"init","session_id":"${SID}"}'
         printf '{"type":"result","subtype":"success","is_error":false,"result":"the answer","num_turns":1}'`
      : `echo '{"type":"session","id":"${SID}"}'
         echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"the answer"}],"stopReason":"stop"}}'`;
    const { dir, program } = await task(
      1,
      `printf '%s\\n' "$@" > "$(dirname "$0")/args.txt"\n${line}`,
    );
    try {
      const out = await runAgent({
        dir,
        run: 1,
        agent,
        cwd: dir,
        home: dir,
        program,
        oneShot: true,
      });
      assert.equal(out.exitCode, 0, JSON.stringify(out.result));
      assert.equal(out.result.result, "the answer");
      const args = (await read(`${dir}/args.txt`))!.split("\n");
      assert.ok(args.includes(agent === "claude" ? "--no-session-persistence" : "--no-tools"));
      assert.equal(await read(`${dir}/session_id`), undefined, `${agent}: no session recorded`);
      assert.equal(await read(`${dir}/exit-1`), "0\n");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
