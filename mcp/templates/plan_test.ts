import assert from "node:assert/strict";
import { STAMP } from "../host/stamps.ts";
import { builtinDefinitions, type Definitions, parseYamlText } from "./load.ts";
import { type BuiltState, freshness, planBuilds } from "./plan.ts";
import { resolveChain } from "./resolve.ts";
import { parseTemplate } from "./schema.ts";

function defs(templates: Record<string, string>): Definitions {
  const d = builtinDefinitions();
  for (const [name, text] of Object.entries(templates)) {
    const file = `/u/templates/${name}.yaml`;
    const def = parseTemplate(file, parseYamlText(file, text), name);
    d.templates.set(def.name, { def, file, layer: "user", trusted: true, files: [] });
  }
  return d;
}

const CHAIN = { a: "image: debian-base", b: "parent: a", c: "parent: b", d: "parent: a" };

/** Stamps as a build of the current definitions would leave them. */
function builtAll(d: Definitions, names: string[]): Map<string, BuiltState> {
  const m = new Map<string, BuiltState>();
  for (const n of names) {
    const chain = resolveChain(d, n);
    const parent = chain.length > 1 ? chain.at(-2)!.template.def.name : undefined;
    m.set(n, {
      [STAMP.type]: "base",
      [STAMP.definitionHash]: chain.at(-1)!.hash,
      [STAMP.buildId]: `id-${n}`,
      [STAMP.parentBuild]: parent ? `id-${parent}` : "",
    });
  }
  return m;
}

Deno.test("freshness tells missing, current, changed and parent-changed apart", () => {
  const built = { [STAMP.type]: "base", [STAMP.definitionHash]: "h", [STAMP.parentBuild]: "p1" };
  const parent = { name: "p", built: { [STAMP.buildId]: "p1" } };
  assert.equal(freshness("h", undefined, undefined), "missing");
  assert.equal(freshness("h", { ...built, [STAMP.type]: "build" }, parent), "missing");
  assert.equal(freshness("h", built, parent), "current");
  assert.equal(freshness("x", built, parent), "changed");
  assert.equal(
    freshness("h", built, { name: "p", built: { [STAMP.buildId]: "p2" } }),
    "parent-changed",
  );
});

const CASES: {
  name: string;
  edit?: Record<string, string>;
  built: string[];
  names: string[];
  opts?: { withParents?: boolean; outOfSync?: boolean };
  want: string[];
}[] = [
  {
    name: "a missing chain is built parents first",
    built: [],
    names: ["c"],
    want: ["a", "b", "c"],
  },
  { name: "built parents are kept", built: ["a", "b"], names: ["c"], want: ["c"] },
  { name: "a requested template is rebuilt", built: ["a", "b", "c"], names: ["b"], want: ["b"] },
  {
    name: "--with-parents rebuilds the chain",
    built: ["a", "b", "c"],
    names: ["c"],
    opts: { withParents: true },
    want: ["a", "b", "c"],
  },
  {
    name: "--out-of-sync with nothing changed builds nothing",
    built: ["a", "b", "c", "d"],
    names: [],
    opts: { outOfSync: true },
    want: [],
  },
  {
    name: "--out-of-sync rebuilds a changed leaf only",
    edit: { c: "parent: b\nrun: echo new" },
    built: ["a", "b", "c", "d"],
    names: [],
    opts: { outOfSync: true },
    want: ["c"],
  },
  {
    name: "--out-of-sync rebuilds a changed template and everything under it",
    edit: { b: "parent: a\nrun: echo new" },
    built: ["a", "b", "c", "d"],
    names: [],
    opts: { outOfSync: true },
    want: ["b", "c"],
  },
  {
    name: "--out-of-sync ignores templates that were never built",
    edit: { d: "parent: a\nrun: echo new" },
    built: ["a", "b", "c"],
    names: [],
    opts: { outOfSync: true },
    want: [],
  },
];

for (const c of CASES) {
  Deno.test(`planBuilds: ${c.name}`, () => {
    const before = defs(CHAIN);
    const built = builtAll(before, c.built);
    const after = defs({ ...CHAIN, ...c.edit });
    assert.deepEqual(planBuilds(after, c.names, built, c.opts).map((p) => p.name), c.want);
  });
}

Deno.test("planBuilds: a parent rebuilt elsewhere makes its children parent-changed", () => {
  const d = defs(CHAIN);
  const built = builtAll(d, ["a", "b", "c"]);
  built.set("b", { ...built.get("b")!, [STAMP.buildId]: "id-b-2" });
  const plan = planBuilds(d, [], built, { outOfSync: true });
  assert.deepEqual(plan, [{ name: "c", reason: "parent-changed" }]);
});
