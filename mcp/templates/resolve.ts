/**
 * Resolution of loaded definitions: a template's parent chain (root first), the tools each
 * template adds (their `requires` closed transitively, dependencies first, minus what the
 * chain above already has), tool parameters, and the definition hash a build is stamped
 * with. Cycles, unknown names and bad parameters are refused with the file and field.
 *
 * Pure: no I/O.
 *
 * @module
 */

import { IsbError, sha256Hex, VERSION } from "../../rpc/base.ts";
import type { Definitions, Loaded, ResolvedFile } from "./load.ts";
import { PARAM_VALUE_RE } from "./names.ts";
import type { TemplateDef, ToolDef, ToolRef } from "./schema.ts";

/** One tool as a template uses it: the definition and its parameter values. */
export interface ToolUse {
  /** The tool definition. */
  tool: Loaded<ToolDef>;
  /** Parameter values (defaults applied); absent keys are unset. */
  params: Record<string, string>;
}

/** One template of a chain with what its own build installs. */
export interface ChainLink {
  /** The template. */
  template: Loaded<TemplateDef>;
  /** Tools this template's build installs, dependencies first (the parents' excluded). */
  tools: ToolUse[];
  /** Every tool name of the chain up to and including this template. */
  allTools: string[];
  /** The definition hash (hex SHA-256) stamped on its build. */
  hash: string;
}

/** A template's chain, root first; the last link is the template itself. */
export type Chain = ChainLink[];

function invalid(message: string): IsbError {
  return new IsbError("invalid", message);
}

function known(map: Map<string, unknown>): string {
  return [...map.keys()].sort().join(", ") || "none";
}

/** The parent chain of `name`, root first (no tools resolved). */
export function templateChain(defs: Definitions, name: string): Loaded<TemplateDef>[] {
  const first = defs.templates.get(name);
  if (!first) throw invalid(`unknown template "${name}" (known: ${known(defs.templates)})`);
  const chain: Loaded<TemplateDef>[] = [first];
  const seen = new Set([name]);
  let cur = first;
  while (cur.def.parent !== undefined) {
    const parent = defs.templates.get(cur.def.parent);
    if (!parent) {
      throw invalid(
        `template file "${cur.file}": field "parent": no template named "${cur.def.parent}" (known: ${
          known(defs.templates)
        })`,
      );
    }
    if (seen.has(parent.def.name)) {
      const names = [...chain.map((l) => l.def.name), parent.def.name];
      throw invalid(`template file "${cur.file}": field "parent": cycle ${names.join(" → ")}`);
    }
    seen.add(parent.def.name);
    chain.push(parent);
    cur = parent;
  }
  const root = chain[chain.length - 1]!;
  if (root.def.image === undefined) {
    throw invalid(`template file "${root.file}": field "image": required on a root template`);
  }
  for (const l of chain.slice(0, -1)) {
    if (l.def.type !== undefined && l.def.type !== (root.def.type ?? "container")) {
      throw invalid(
        `template file "${l.file}": field "type": "${l.def.type}" differs from its root "${root.def.name}"`,
      );
    }
  }
  return chain.reverse();
}

function refName(ref: ToolRef): string {
  return typeof ref === "string" ? ref : ref.name;
}

function refParams(
  t: Loaded<TemplateDef>,
  i: number,
  ref: ToolRef,
  tool: Loaded<ToolDef>,
): Record<string, string> {
  const declared = tool.def.params ?? {};
  const out: Record<string, string> = {};
  for (const [k, p] of Object.entries(declared)) if (p.default !== undefined) out[k] = p.default;
  if (typeof ref === "string") return out;
  for (const [k, v] of Object.entries(ref)) {
    if (k === "name") continue;
    const field = `tools[${i}].${k}`;
    if (!(k in declared)) {
      const allowed = Object.keys(declared).join(", ") || "no parameters";
      throw invalid(
        `template file "${t.file}": field "${field}": tool "${tool.def.name}" takes ${allowed}`,
      );
    }
    if (typeof v !== "string" || !PARAM_VALUE_RE.test(v)) {
      throw invalid(
        `template file "${t.file}": field "${field}": expected a value like claude-sonnet-4-6 (letters, digits and ._:@/[]-)`,
      );
    }
    out[k] = v;
  }
  return out;
}

/** Adds `name` and what it requires (transitively) to `out`, dependencies first. */
function closeTool(
  defs: Definitions,
  name: string,
  from: { file: string; field: string },
  path: string[],
  out: string[],
): void {
  if (out.includes(name)) return;
  const tool = defs.tools.get(name);
  if (!tool) {
    throw invalid(
      `${from.file}: field "${from.field}": unknown tool "${name}" (known: ${known(defs.tools)})`,
    );
  }
  if (path.includes(name)) {
    throw invalid(`${from.file}: field "${from.field}": cycle ${[...path, name].join(" → ")}`);
  }
  (tool.def.requires ?? []).forEach((req, i) =>
    closeTool(defs, req, { file: `tool file "${tool.file}"`, field: `requires[${i}]` }, [
      ...path,
      name,
    ], out)
  );
  out.push(name);
}

/** Resolves a template's whole chain: tools per link, parameters and hashes. */
export function resolveChain(defs: Definitions, name: string): Chain {
  const links: Chain = [];
  const have: string[] = [];
  let parentHash = "";
  for (const t of templateChain(defs, name)) {
    const wanted: string[] = [];
    const params = new Map<string, Record<string, string>>();
    (t.def.tools ?? []).forEach((ref, i) => {
      const n = refName(ref);
      closeTool(defs, n, { file: `template file "${t.file}"`, field: `tools[${i}]` }, [], wanted);
      params.set(n, refParams(t, i, ref, defs.tools.get(n)!));
    });
    const own = wanted.filter((n) => !have.includes(n));
    const tools = own.map((n) => {
      const tool = defs.tools.get(n)!;
      return { tool, params: params.get(n) ?? refParams(t, -1, n, tool) };
    });
    have.push(...own);
    const hash = definitionHash(t, tools, parentHash);
    links.push({ template: t, tools, allTools: [...have], hash });
    parentHash = hash;
  }
  return links;
}

function fileDigest(files: readonly ResolvedFile[]): unknown[] {
  return files.map((f) => ({
    path: f.path,
    mode: f.mode,
    owner: f.owner,
    sha256: sha256Hex(f.data),
  }));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === "object") {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k];
      if (x !== undefined) o[k] = canonical(x);
    }
    return o;
  }
  return v;
}

/**
 * The hash of what a template's build puts on disk: its own fields (not `description`,
 * `network`, `limits` or `summary_agent`, which a build does not use), its tools with their parameters (not
 * their `configuration` and `proxy`: only the proxy reads those, and they hold secrets), the
 * bytes of every file, and its parent's hash (so editing a parent changes every child).
 */
export function definitionHash(
  t: Loaded<TemplateDef>,
  tools: ToolUse[],
  parentHash: string,
): string {
  const { description: _d, network: _n, limits: _l, summary_agent: _s, files: _f, ...own } = t.def;
  const toolPart = tools.map(({ tool, params }) => {
    const { description: _td, files: _tf, configuration: _tc, proxy: _tp, ...rest } = tool.def;
    return {
      def: rest,
      params,
      files: fileDigest(tool.files),
      ...(tool.def.program ? { version: VERSION } : {}),
    };
  });
  const input = canonical({ own, files: fileDigest(t.files), tools: toolPart, parentHash });
  return sha256Hex(JSON.stringify(input));
}

/** Every template's name in dependency order (parents before children). */
export function buildOrder(defs: Definitions, names: readonly string[]): string[] {
  const out: string[] = [];
  for (const n of names) {
    for (const l of templateChain(defs, n)) if (!out.includes(l.def.name)) out.push(l.def.name);
  }
  return out;
}
