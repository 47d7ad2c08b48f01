import assert from "node:assert/strict";
import { load } from "js-yaml";
import { IsbError } from "./errors.ts";
import { CONFIG_TEMPLATE, CREDENTIALS_TEMPLATE } from "../mcp/host/config.ts";
import { parseYaml } from "./yaml.ts";

/** Documents of the supported subset, each read as js-yaml 5 reads it. */
const SAME = [
  // the incus client's config.yml as `incus remote add` writes it (Go yaml)
  "default-remote: local\nremotes:\n  images:\n    addr: https://images.linuxcontainers.org\n" +
  "    protocol: simplestreams\n    public: true\n  lab:\n    addr: https://10.0.0.5:8443\n" +
  "    auth_type: tls\n    project: 'dev'\n    protocol: incus\n    public: false\n" +
  "  local:\n    addr: unix://\n    public: false\naliases: {}\n",
  "a: 0755\nb: 0x1F\nc: 0o17\nd: +12\ne: 1.5e3\nf: .5\ng: -0\nh: 1.\ni: 1_000\nj: 0b101",
  "a: ~\nb: Null\nc: TRUE\nd: false\ne: yes\nf: on\ng: 2024-01-02\nh: 12:30\ni: null",
  "a: .inf\nb: -.Inf\nc: .NaN",
  "a: 'it''s'\nb: \"x\\u00e9\\x41\\t\\\\\\\"\"\nc: it's\nd: x #c\ne: x#c\nf: '#x'\ng: \"\"",
  "a:\n- 1\n- 2\nb: 3",
  "- a: 1\n  b: 2\n- c\n-\n- - y\n  - z\n-   k: v\n    l: w",
  "a: |\n  x\n   y\n\n  z\n",
  "a: >\n  x\n  y\n\n  z\n   w\n  v\n",
  "a: >-\n  one\n  two\n\n\n  three\nb: 1",
  "a: |-\n  x\n",
  "a: |+\n  x\n\n",
  "a: |2\n    x\n  y\n",
  "a: |\n  x\n\n  # not a comment\nb: 2",
  "a: |\nb: 1",
  "a: b\n  c\n\n  d\ne: f",
  "{a: 1, b: [x, y], c: }",
  'a: [1,\n  2, # two\n  3]\nb: {x: 1,\n  y: "q, r"}',
  "--- \na: 1",
  "---\na: 1\n...\n",
  "a: {x: 1,}\nb: [a b, c]\nc: [x: 1]\nd: {x}\ne: []\nf: {}",
  "a:\n  - x\n  -\n  - - y",
  "'a b': 1\n\"c: d\": 2\n1: one\nnull: n",
  "a: 1 # c\n# d\nb: 2\n   # indented comment\nc: 3",
  "a:    \n  b: 1\n  c:\n    d: [1, 2]\n    e: {f: g}",
  'url: http://x.example/a#b\nk: v:w\nq: a - b\ns: -x\nt: "*.example.org"',
  "anthropic: { accounts: { a: { api_key: sk-ant-api03-BENCH-REAL-KEY } } }",
  "\ufeffa: 1\r\nb: [x, 'y']\r\n",
  "plain top-level scalar",
  "- x\n- y",
  "a:\n  b:\n    c:\n      - d\n      - e: f\n        g: h\n  i: j",
  "list: [gcloud, auth, print-access-token]\nn: 3600\nbool: [true, false, null, ~]",
  "a: [\"x\n  y\", 'p\n\n  q']",
];

/** js-yaml reads these too; this reader refuses them, with the line and without the text. */
const REFUSED: [string, RegExp][] = [
  ["a: &x 1\nb: *x", /line 1: anchors, aliases, tags/],
  ["? a\n: b", /line 1: anchors/],
  ["k: !!str 1", /line 1: anchors/],
  ["a: 1\n---\nb: 2", /line 2: only one document/],
  ['a: "x\n  y"', /line 1: a quoted value is not closed/],
  ['a: "x\\\n  y"', /line 1: a quoted value is not closed/],
];

/** Neither reads these. */
const BAD = [
  "a: 1\na: 2",
  "a: b: c",
  "a: -",
  "a: [1, 2",
  "a: 1\n  b: 2",
  "a:\n\t- x",
  'a: "\\q"',
  "{a: 1, a: 2}",
  "a: 'x' y",
  "a: |x\n  y",
];

Deno.test("parseYaml reads the supported subset as js-yaml does", () => {
  for (const text of SAME) {
    const want = load(text.replace(/^\ufeff/, ""));
    assert.deepEqual(parseYaml(text), want === undefined ? null : want, JSON.stringify(text));
  }
});

Deno.test("parseYaml reads the files isx init writes and every YAML example in the docs as js-yaml does", async () => {
  const texts = [CONFIG_TEMPLATE, CREDENTIALS_TEMPLATE];
  const docs = new URL("../docs/", import.meta.url);
  for (
    const f of [...Deno.readDirSync(docs)].filter((e) => e.name.endsWith(".md")).map((e) => e.name)
      .sort()
  ) {
    const md = await Deno.readTextFile(new URL(f, docs));
    for (const m of md.matchAll(/```ya?ml\n([\s\S]*?)```/g)) texts.push(m[1]!);
  }
  // and the examples in the config readers' module docs
  for (const f of ["credentials.ts", "host_config.ts"]) {
    const src = await Deno.readTextFile(new URL(`../proxy/config/${f}`, import.meta.url));
    for (const m of src.matchAll(/```yaml\n([\s\S]*?) \* ```/g)) {
      texts.push(m[1]!.replace(/^ \*( |$)/gm, ""));
    }
  }
  let read = 0;
  for (const text of texts) {
    let want: unknown;
    try {
      want = load(text);
    } catch {
      continue; // fragments with "…" in place of text, and the like
    }
    assert.deepEqual(parseYaml(text), want ?? null, text);
    read++;
  }
  assert.ok(read >= 8, `only ${read} YAML examples read`);
});

Deno.test("parseYaml refuses anchors, tags, ? keys, several documents and multi-line quotes by line", () => {
  for (const [text, msg] of REFUSED) {
    assert.throws(() => parseYaml(text), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "parse", String(e));
      assert.match(e.message, msg);
      return true;
    }, text);
  }
});

Deno.test("parseYaml refuses what js-yaml refuses, never quoting the text", () => {
  for (const text of BAD) {
    assert.throws(() => load(text), Error, `js-yaml reads ${JSON.stringify(text)}`);
    assert.throws(() => parseYaml(text), (e: unknown) => {
      assert.ok(e instanceof IsbError && e.code === "parse", String(e));
      assert.match(e.message, /^line \d+: /);
      for (const word of text.split(/\W+/).filter((w) => w.length > 1)) {
        assert.ok(!e.message.includes(` ${word} `), e.message);
      }
      return true;
    }, JSON.stringify(text));
  }
});

Deno.test("parseYaml reads an empty or comments-only text as null (js-yaml 5 refuses it)", () => {
  for (const text of ["", "\n", "# only\n\n  # comments\n", "---\n# c"]) {
    assert.equal(parseYaml(text), null, JSON.stringify(text));
  }
});

Deno.test("parseYaml keeps __proto__ as a plain key", () => {
  const got = parseYaml("__proto__: {polluted: 1}\nb: {__proto__: 2}") as Record<string, unknown>;
  assert.deepEqual(Object.keys(got), ["__proto__", "b"]);
  assert.equal(Object.getPrototypeOf(got), Object.prototype);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});
