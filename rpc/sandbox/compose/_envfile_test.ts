import assert from "node:assert/strict";
import { parseEnvFile } from "./_envfile.ts";

Deno.test("parseEnvFile reads KEY=VALUE lines, export, quotes, blanks and comments", () => {
  const text =
    "# c\nA=1\nexport B=\"two words\"\nC='x'\n\nD=\n  E = spaced  \nF=a # not a comment\nG=\"unbalanced'\nH=x=y\n";
  assert.deepStrictEqual(parseEnvFile(text), [
    ["A", "1"],
    ["B", "two words"],
    ["C", "x"],
    ["D", ""],
    ["E", "spaced"],
    ["F", "a # not a comment"],
    ["G", "\"unbalanced'"],
    ["H", "x=y"],
  ]);
});

Deno.test("parseEnvFile does not expand variables", () => {
  assert.deepStrictEqual(parseEnvFile("A=${B}\n"), [["A", "${B}"]]);
});

Deno.test("parseEnvFile refuses a line without = naming its number", () => {
  assert.throws(() => parseEnvFile("A=1\nnope\n"), /env file line 2: expected KEY=VALUE/);
});
