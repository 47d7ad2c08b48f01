import assert from "node:assert/strict";
import { parseFacts, parseListing, parseProbe, parseStatus } from "./parse.ts";
import { toBase64 } from "./script.ts";

const b = toBase64;

const STATUS = [
  "facts=1 7 - - -",
  "kind=command",
  "started=1796135608",
  "stdout_bytes=70000",
  "stderr_bytes=4",
  "activity=1796135610",
  "cwd=/home/agentuser/r",
  "key=job:1",
  "---",
  b("é tail\n"),
  "---stderr",
  b("err\n"),
  "",
].join("\n");

Deno.test("parseStatus reads a finished command's status and tails", () => {
  assert.deepEqual(parseStatus("t1-abcd", STATUS), {
    task_id: "t1-abcd",
    state: "finished",
    run: 1,
    exit_code: 7,
    kind: "command",
    started_at: "2026-12-01T14:33:28.000Z",
    last_activity: "2026-12-01T14:33:30.000Z",
    stdout_bytes: 70000,
    stderr_bytes: 4,
    stdout_tail: "é tail\n",
    stderr_tail: "err\n",
    cwd: "/home/agentuser/r",
    key: "job:1",
  });
});

Deno.test("parseStatus of a missing task directory is lost, run 0", () => {
  const st = parseStatus("t1-abcd", "facts=missing - - - -\n");
  assert.equal(st.state, "lost");
  assert.equal(st.run, 0);
});

Deno.test("parseStatus never throws on output cut at any byte", () => {
  const full = parseStatus("t1-abcd", STATUS);
  for (let i = 0; i <= STATUS.length; i++) {
    const st = parseStatus("t1-abcd", STATUS.slice(0, i));
    assert.equal(st.task_id, "t1-abcd");
    assert.ok(["finished", "unknown"].includes(st.state), `cut at ${i}: ${st.state}`);
    // a cut never invents a value the whole output does not have
    for (const k of ["exit_code", "kind", "cwd", "key", "stdout_tail", "stderr_tail"] as const) {
      if (k.endsWith("_tail") && st[k] === "") continue;
      if (st[k] !== undefined) assert.equal(st[k], full[k], `cut at ${i}: ${k}`);
    }
  }
});

Deno.test("parseStatus drops hostile guest-written values", () => {
  const out = [
    "facts=1 9999 - - -",
    "kind=shell",
    "started=soon",
    "stdout_bytes=-1",
    "stderr_bytes=1e9",
    "cwd=relative/path",
    "session_id=a b;rm -rf /",
    "model=$(reboot)",
    "max-turns=0",
    `key=${"k".repeat(65)}`,
    "---",
    "%%%not base64%%%",
    "---stderr",
    "",
  ].join("\n");
  const st = parseStatus("t1-abcd", out);
  assert.deepEqual(st, {
    task_id: "t1-abcd",
    state: "finished",
    run: 1,
    stdout_bytes: 0,
    stderr_bytes: 0,
    stdout_tail: "",
    stderr_tail: "",
  });
  const ctl = parseStatus("t1-abcd", "facts=1 0 - - -\ncwd=/tmp/a\x1b[2Jb\n");
  assert.equal(ctl.cwd, undefined);
});

Deno.test("parseFacts refuses malformed lines and ids", () => {
  assert.equal(parseFacts("../etc 1 - - - -"), undefined);
  assert.equal(parseFacts("T1 1 - - - -"), undefined);
  assert.equal(parseFacts("t1-abcd x - - - -"), undefined);
  assert.equal(parseFacts("t1-abcd 1 -"), undefined);
  assert.deepEqual(parseFacts("t1-abcd 2 - active 12 -"), {
    id: "t1-abcd",
    facts: { run: 2, unit: "active", cancelAge: 12 },
  });
  assert.deepEqual(parseFacts("t1-abcd 2 ? - - -")?.facts, { run: 2, exit: "invalid", unit: "" });
});

Deno.test("parseProbe decides each task and skips junk lines", () => {
  const text = "t1-a 1 - active - -\nt2-b 1 0 - - -\ngarbage\nt3-c missing - - - -\n";
  for (let i = 0; i < text.length; i++) {
    for (const [id, d] of parseProbe(text.slice(0, i))) {
      assert.deepEqual(d, parseProbe(text).get(id), `cut at ${i}`);
    }
  }
  const m = parseProbe(text);
  assert.deepEqual([...m], [
    ["t1-a", { state: "running", run: 1 }],
    ["t2-b", { state: "finished", run: 1, exit_code: 0 }],
    ["t3-c", { state: "lost", run: 0 }],
  ]);
});

Deno.test("parseListing re-validates kind, model, max-turns, key and cwd", () => {
  const line = (facts: string, f: string[]) => `${facts} |${f.join("|")}`;
  const out = [
    line("t1-a 1 - active - -", ["agent", "opus[1m]", "50", "job.1", "/home/agentuser/a|b"]),
    line("t2-b 1 0 - - -", ["bogus", "rm -rf /", "-3", "bad key!", "/x\ty"]),
    "t3-c 1 0 - - -", // no recorded fields: skipped as malformed
    "",
  ].join("\n");
  assert.deepEqual(parseListing(out), [
    {
      task_id: "t1-a",
      state: "running",
      run: 1,
      kind: "agent",
      model: "opus[1m]",
      max_turns: 50,
      key: "job.1",
      cwd: "/home/agentuser/a|b",
    },
    { task_id: "t2-b", state: "finished", run: 1, exit_code: 0 },
  ]);
});
