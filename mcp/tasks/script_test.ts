import assert from "node:assert/strict";
import { commandRunScript, foregroundSetup, shQuote } from "./script.ts";

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

Deno.test("foregroundSetup exports hostile env values as data", async () => {
  for (const v of HOSTILE) {
    const s = foregroundSetup({ command: "unused", env: { V: v } });
    assert.equal(await bash(`${s}printf '%s' "$V"`), v);
  }
  assert.equal(foregroundSetup({ command: "x" }), "");
});

Deno.test("foregroundSetup refuses bad env names and NUL in command, env and cwd", () => {
  assert.throws(() => foregroundSetup({ command: "x", env: { "A;B": "1" } }), /env/);
  assert.throws(() => foregroundSetup({ command: "a\0b" }), /NUL/);
  assert.throws(() => foregroundSetup({ command: "x", env: { A: "\0" } }), /NUL/);
  assert.throws(() => foregroundSetup({ command: "x", cwd: "/a\0b" }), /NUL/);
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
