import assert from "node:assert/strict";
import { ISB_CODES } from "../rpc/mod.ts";
import { COMMANDS, LAZY_MODULES } from "./commands.ts";
import { EXIT_CODES, EXIT_USAGE, mainHelp } from "./mod.ts";

Deno.test("EXIT_CODES maps every IsbCode to a failure code other than usage", () => {
  for (const code of ISB_CODES) {
    const exit = EXIT_CODES[code];
    assert.ok(Number.isInteger(exit) && exit > 0 && exit !== EXIT_USAGE, `${code} -> ${exit}`);
  }
  assert.deepEqual(Object.keys(EXIT_CODES).sort(), [...ISB_CODES].sort());
});

Deno.test("mainHelp lists each command of the program name and the global flags", () => {
  const isb = mainHelp("isb");
  assert.match(isb, /Usage: isb /);
  assert.match(isb, /\brpc\b/);
  assert.match(isb, /--socket PATH/);
  assert.doesNotMatch(isb, /\bguest\b/);
  assert.match(mainHelp("isx"), /\bguest\b/);
});

Deno.test("COMMANDS: each entry's loader returns its command, with the same name, programs and summary", async () => {
  const names = COMMANDS.map((c) => c.name);
  assert.equal(new Set(names).size, names.length);
  for (const entry of COMMANDS) {
    const cmd = await entry.load();
    assert.equal(cmd.name, entry.name);
    assert.deepEqual(cmd.progs, entry.progs, entry.name);
    assert.equal(cmd.summary, entry.summary, entry.name);
  }
});

Deno.test("COMMANDS: each module is named relative to cli/ and exists", async () => {
  for (const entry of COMMANDS) {
    assert.match(entry.module, /^[a-z_]+\.ts$/);
    await Deno.stat(new URL(entry.module, import.meta.url));
  }
});

Deno.test("cli/bundle.ts registers every module the dispatch table names", async () => {
  const { BUNDLED } = await import("./bundle.ts");
  const modules = new Set([...COMMANDS.map((c) => c.module), ...LAZY_MODULES]);
  assert.deepEqual(Object.keys(BUNDLED).sort(), [...modules].sort());
});

Deno.test("every module cli/ imports by importModule is a command's or in LAZY_MODULES", () => {
  const known = new Set([...COMMANDS.map((c) => c.module), ...LAZY_MODULES]);
  const named: string[] = [];
  for (const e of Deno.readDirSync(new URL(".", import.meta.url))) {
    if (!e.name.endsWith(".ts") || e.name.endsWith("_test.ts")) continue;
    const src = Deno.readTextFileSync(new URL(e.name, import.meta.url));
    for (const m of src.matchAll(/importModule<.*?>\(\s*"([^"]+)"/g)) named.push(m[1]!);
  }
  assert.ok(named.includes("mcp_backend.ts"), named.join()); // the pattern finds them
  assert.deepEqual(named.filter((m) => !known.has(m)), []);
});
