import assert from "node:assert/strict";
import { IsbError } from "../../errors.ts";
import { interpolate, interpolateTree } from "./_interpolate.ts";

const ENV: Record<string, string> = { NAME: "web", EMPTY: "", PORT: "5173" };
const lookup = (k: string) => (Object.hasOwn(ENV, k) ? ENV[k] : undefined);

const FORMS = [
  ["${NAME}", "web"],
  ["$NAME-x", "web-x"],
  ["tcp:1.2.3.4:${PORT}", "tcp:1.2.3.4:5173"],
  ["no vars", "no vars"],
  ["${MISSING:-d}", "d"],
  ["${EMPTY:-d}", "d"],
  ["${EMPTY-d}", ""],
  ["${MISSING-d}", "d"],
  ["${MISSING:-}", ""],
  ["${MISSING:-${NAME}}", "web"],
  ["${MISSING:-a-${PORT}-b}", "a-5173-b"],
  ["${NAME:+yes}", "yes"],
  ["${EMPTY:+yes}", ""],
  ["${EMPTY+yes}", "yes"],
  ["${MISSING+yes}", ""],
  ["${EMPTY?x}", ""],
  ["${NAME:?x}", "web"],
  ["$$NAME", "$NAME"],
  ["cost: 5$", "cost: 5$"],
  ["a $ b", "a $ b"],
  ["$(cmd)", "$(cmd)"],
  ["$1", "$1"],
];

for (const [input, want] of FORMS) {
  Deno.test(`interpolate turns ${JSON.stringify(input)} into ${JSON.stringify(want)}`, () => {
    assert.equal(interpolate(input!, lookup), want);
  });
}

const ERRORS = [
  [
    "${MISSING}",
    "variable MISSING is not set (use ${MISSING:-default} to allow that, or $$MISSING for a literal $",
  ],
  ["$MISSING", "variable MISSING is not set"],
  ["${MISSING:?set the thing}", "MISSING: set the thing"],
  ["${MISSING?}", "MISSING is required"],
  ["${EMPTY:?}", "EMPTY is required"],
  ["${NAME", "unterminated ${"],
  ["${1BAD}", "invalid variable name"],
  ["${NAME/x/y}", "unsupported expansion ${NAME/x/y}"],
  ["${MISSING:-${ALSO}}", "variable ALSO is not set"],
];

for (const [input, text] of ERRORS) {
  Deno.test(`interpolate refuses ${JSON.stringify(input)} as interpolation`, () => {
    assert.throws(() => interpolate(input!, lookup), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "interpolation");
      assert.ok(e.message.startsWith("interpolation: "), e.message);
      assert.ok(e.message.includes(text!), e.message);
      return true;
    });
  });
}

Deno.test("interpolateTree rewrites string values and keys, never numbers or structure", () => {
  const tree = { a: "${NAME}", "${NAME}": ["x", "$PORT"], n: 3, b: true, z: null };
  assert.deepStrictEqual(interpolateTree(tree, lookup), {
    a: "web",
    web: ["x", "5173"],
    n: 3,
    b: true,
    z: null,
  });
  const evil = interpolateTree({ a: "${EVIL}" }, () => "x\nb: injected");
  assert.deepStrictEqual(evil, { a: "x\nb: injected" });
});
