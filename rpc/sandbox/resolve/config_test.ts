import assert from "node:assert/strict";
import { memoryLimit, ociCommandLine } from "./config.ts";
import { invalidWith } from "../../../tests/helpers/host_facts.ts";

const MEMORY = [
  ["512m", "512MiB"],
  ["8g", "8GiB"],
  ["8GB", "8GiB"],
  ["1k", "1KiB"],
  ["2t", "2TiB"],
  ["1024", "1024"],
  ["8GiB", "8GiB"],
  ["50%", "50%"],
];
for (const [m, want] of MEMORY) {
  Deno.test(`memoryLimit turns ${m} into ${want}`, () => assert.equal(memoryLimit(m!), want));
}

Deno.test("ociCommandLine quotes words with spaces and refuses both quote kinds", () => {
  assert.equal(ociCommandLine(["a", "b c", 'say "x"', ""]), `a "b c" 'say "x"' ""`);
  invalidWith(() => ociCommandLine([`it's "x"`]), "both ' and \"");
});
