import assert from "node:assert/strict";
import { commandRunScript, foregroundScript, shQuote } from "./script.ts";

const HOSTILE = [
  "$(touch /tmp/pwned)",
  "`touch /tmp/pwned`",
  "'; touch /tmp/pwned; '",
  "a'b\"c\\d$HOME\n!x",
  "",
];

async function bash(script: string): Promise<string> {
  const out = await new Deno.Command("bash", { args: ["-c", script], stdout: "piped" }).output();
  return new TextDecoder().decode(out.stdout);
}

Deno.test("shQuote makes every value one literal shell word", async () => {
  for (const v of HOSTILE) {
    assert.equal(await bash(`printf '%s' ${shQuote(v)}`), v);
  }
});

Deno.test("foregroundScript passes hostile env and command as data", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (const v of HOSTILE) {
      const s = foregroundScript({
        command: `printf '%s' "$V"; cd ${shQuote(dir)}`,
        env: { V: v },
        cwd: dir,
      });
      assert.equal(await bash(s), v);
    }
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("foregroundScript exits 125 when the cwd does not exist", async () => {
  const r = await new Deno.Command("bash", {
    args: ["-c", foregroundScript({ command: "true", cwd: "/nonexistent/$(x)" })],
    stderr: "null",
  }).output();
  assert.equal(r.code, 125);
});

Deno.test("commandRunScript refuses bad env names, ids and NUL", () => {
  assert.throws(() => commandRunScript("t1-a", { command: "x", env: { "A;B": "1" } }), /env/);
  assert.throws(() => commandRunScript("../x", { command: "x" }), /task id/);
  assert.throws(() => commandRunScript("t1-a", { command: "a\0b" }), /NUL/);
  assert.throws(() => commandRunScript("t1-a", { command: "x", cwd: "\0" }), /NUL/);
});

Deno.test("commandRunScript exports the marker after the caller's env", () => {
  const s = commandRunScript("t1-a", { command: "x", env: { ISX_MCP_TASK: "other" } });
  assert.ok(s.indexOf("ISX_MCP_TASK='other'") < s.indexOf("export ISX_MCP_TASK=t1-a"));
});
