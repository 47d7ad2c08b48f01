import assert from "node:assert/strict";
import { IsbError } from "./errors.ts";
import { CONFIG_TEMPLATE, CREDENTIALS_TEMPLATE } from "../mcp/host/config.ts";
import { parseYaml } from "./yaml.ts";

/** The core schema of YAML 1.2, not YAML 1.1's: what config files are read as. */
const CORE: [string, unknown][] = [
  ["a: 0755\nb: 0x1F\nc: 0o17\nd: +12\ne: 1.5e3\nf: .5", {
    a: 755,
    b: 31,
    c: 15,
    d: 12,
    e: 1500,
    f: 0.5,
  }],
  ["a: ~\nb: Null\nc: TRUE\nd: false\ni: null\nj:", {
    a: null,
    b: null,
    c: true,
    d: false,
    i: null,
    j: null,
  }],
  ["a: yes\nb: on\nc: 2024-01-02\nd: 12:30\ne: 1_000\nf: 0b101", {
    a: "yes",
    b: "on",
    c: "2024-01-02",
    d: "12:30",
    e: "1_000",
    f: "0b101",
  }],
  ["a: .inf\nb: -.Inf", { a: Infinity, b: -Infinity }],
  ["a: 'it''s'\nb: \"x\\u00e9\\t\"\nc: x #c\nd: '#x'", {
    a: "it's",
    b: "x\u00e9\t",
    c: "x",
    d: "#x",
  }],
  ["a: |\n  x\n   y\nb: >-\n  one\n  two\n", { a: "x\n y\n", b: "one two" }],
  ["1: one\nnull: n\n'a b': [1, {c: d}]", { 1: "one", null: "n", "a b": [1, { c: "d" }] }],
  ["\ufeffa: 1\r\nb: [x, 'y']\r\n", { a: 1, b: ["x", "y"] }],
  ["anthropic: { accounts: { a: { api_key: sk-ant-api03-REAL } } }", {
    anthropic: { accounts: { a: { api_key: "sk-ant-api03-REAL" } } },
  }],
];

/** Refused, each naming its line; no message may quote the text. */
const BAD = [
  "a: 1\na: 2",
  "{a: 1, a: 2}",
  "a: b: c",
  "a: -",
  "a: [1, 2",
  "a: 1\n  b: 2",
  "a:\n\t- x",
  'a: "\\q"',
  "a: 'x' y",
  "a: |x\n  y",
  "key: !sk-ant-SECRET1",
  "key: !!sk-ant-SECRET2 x",
  "key: !<urn:sk-ant-SECRET3> x",
  "key: !sk!SECRET4 x",
  "key: *sk-ant-SECRET5",
  "anthropic:\n  accounts: { me: { api_key: sk-ant-SECRET6\n",
  "merge: {<<: {a: 1}}\nb: {a: 1, a: 2}",
];

Deno.test("parseYaml reads the core schema (YAML 1.2): yes, on and dates stay strings", () => {
  for (const [text, want] of CORE) assert.deepEqual(parseYaml(text), want, JSON.stringify(text));
});

Deno.test("parseYaml reads an empty or comments-only text as null (js-yaml's load refuses it)", () => {
  for (const text of ["", "\n", "# only\n\n  # comments\n", "---\n# c", CREDENTIALS_TEMPLATE]) {
    assert.equal(parseYaml(text), null, JSON.stringify(text));
  }
  assert.ok(parseYaml(CONFIG_TEMPLATE) === null || typeof parseYaml(CONFIG_TEMPLATE) === "object");
});

Deno.test("parseYaml refuses several documents", () => {
  assert.throws(() => parseYaml("a: 1\n---\nb: 2"), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.code === "parse", String(e));
    assert.match(e.message, /only one document/);
    return true;
  });
});

Deno.test("parseYaml refuses by line, never quoting the text (no snippet, no tag or alias name)", () => {
  for (const text of BAD) {
    assert.throws(() => parseYaml(text), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "parse", String(e));
      assert.match(e.message, /^line \d+: [^\n]+$/);
      assert.ok(!/SECRET|sk-/.test(e.message), e.message);
      for (const word of text.split(/\W+/).filter((w) => w.length > 1)) {
        assert.ok(!e.message.includes(` ${word} `), `${e.message} quotes ${word}`);
      }
      return true;
    }, JSON.stringify(text));
  }
});

Deno.test("parseYaml refuses duplicate keys, naming the line of the second", () => {
  assert.throws(() => parseYaml("a: 1\nb:\n  c: 1\n  c: 2"), (e: unknown) => {
    assert.ok(e instanceof IsbError && e.message === "line 4: duplicated mapping key", String(e));
    return true;
  });
});

Deno.test("parseYaml keeps __proto__ as a plain key", () => {
  const got = parseYaml("__proto__: {polluted: 1}\nb: {__proto__: 2}") as Record<string, unknown>;
  assert.deepEqual(Object.keys(got), ["__proto__", "b"]);
  assert.equal(Object.getPrototypeOf(got), Object.prototype);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

Deno.test("parseYaml reads anchors and aliases, not merge keys", () => {
  assert.deepEqual(parseYaml("a: &x [1]\nb: *x"), { a: [1], b: [1] });
  assert.deepEqual(parseYaml("a: {<<: {x: 1}}"), { a: { "<<": { x: 1 } } });
});
