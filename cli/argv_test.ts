import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import { type OptionSpec, parseArgv } from "./argv.ts";

const OPTIONS: Record<string, OptionSpec> = {
  yes: { type: "boolean", short: "y" },
  lines: { type: "string", short: "n" },
  follow: { type: "boolean", short: "f" },
  account: { type: "string", multiple: true },
  watch: { type: "boolean", multiple: true },
  timeout: { type: "string", default: "30s" },
  quiet: { type: "boolean", default: false },
};

const ARGS: string[][] = [
  [],
  ["a", "b"],
  ["--yes", "x"],
  ["-y"],
  ["-n5"],
  ["-n", "5"],
  ["--lines", "5", "--lines=6"],
  ["--lines="],
  ["--lines=-3"],
  ["-n-3"],
  ["-fy"],
  ["-yn", "3"],
  ["-ny"],
  ["-yfn7", "rest"],
  ["--lines", "-3"],
  ["-n", "-3"],
  ["--lines"],
  ["-n"],
  ["--timeout"],
  ["--timeout", "5m"],
  ["--yes=1"],
  ["--follow=", "x"],
  ["-z"],
  ["-yz"],
  ["--zz"],
  ["--zz=1"],
  ["--", "--yes", "-n"],
  ["x", "--", "y"],
  ["-"],
  ["-1"],
  ["--account", "a", "--account=b", "--account", "c"],
  ["--watch", "--watch"],
  ["--quiet"],
  ["--toString"],
  ["--__proto__"],
  ["--constructor=1"],
];

Deno.test("parseArgv gives parseArgs's values, positionals and messages on a table of argv", () => {
  for (const allowPositionals of [true, false]) {
    for (const args of ARGS) {
      const what = `${JSON.stringify(args)} positionals ${allowPositionals}`;
      let want: unknown, got: unknown;
      try {
        const r = parseArgs({ args, options: OPTIONS, allowPositionals, strict: true });
        want = { values: { ...r.values }, positionals: r.positionals };
      } catch (e) {
        want = { error: (e as Error).message };
      }
      try {
        const r = parseArgv(args, OPTIONS, allowPositionals);
        got = { values: { ...r.values }, positionals: r.positionals };
      } catch (e) {
        assert.ok(e instanceof TypeError, what);
        got = { error: e.message };
      }
      assert.deepEqual(got, want, what);
    }
  }
});
