import assert from "node:assert/strict";
import { ISB_CODES } from "../rpc/mod.ts";
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
