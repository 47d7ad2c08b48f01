/**
 * Which templates a build run builds, and in what order (pure). A template is compared with
 * its built instance's stamps: missing, current, changed (its definition hash differs) or
 * parent-changed (built on another build of its parent, or its parent is rebuilt in this
 * run). `isx build A` builds A and any missing parent; `--with-parents` rebuilds the whole
 * chain; `--out-of-sync` rebuilds only what is not current, which reaches everything under
 * a changed template because a parent's hash is part of its children's.
 *
 * @module
 */

import { STAMP } from "../host/stamps.ts";
import type { Definitions } from "./load.ts";
import { buildOrder, resolveChain } from "./resolve.ts";

/** A template's built instance as far as planning cares: its stamps, or absent. */
export type BuiltState = Record<string, string> | undefined;

/** How a template relates to its built instance. */
export type Freshness = "missing" | "current" | "changed" | "parent-changed";

/** Compares one template's resolved hash and parent build with its built stamps. */
export function freshness(
  hash: string,
  built: BuiltState,
  parent: { name: string; built: BuiltState } | undefined,
): Freshness {
  if (!built || built[STAMP.type] !== "base") return "missing";
  if (built[STAMP.definitionHash] !== hash) return "changed";
  if (parent && built[STAMP.parentBuild] !== parent.built?.[STAMP.buildId]) return "parent-changed";
  return "current";
}

/** Options of {@link planBuilds}. */
export interface PlanOptions {
  /** Rebuild every parent too. */
  withParents?: boolean;
  /** Rebuild only what changed, and what is under it. */
  outOfSync?: boolean;
}

/** One planned build and why. */
export interface PlannedBuild {
  /** The name. */
  name: string;
  /** Why it is built. */
  reason:
    | "requested"
    | "missing"
    | "changed"
    | "parent-changed"
    | "parent-rebuilt"
    | "with-parents";
}

/**
 * The builds of one run, parents first. `names` empty with `outOfSync`: every defined
 * template that is built. `built` maps template names to their stamps.
 */
export function planBuilds(
  defs: Definitions,
  names: readonly string[],
  built: ReadonlyMap<string, BuiltState>,
  opts: PlanOptions = {},
): PlannedBuild[] {
  const wanted = names.length || !opts.outOfSync
    ? [...names]
    : [...defs.templates.keys()].filter((n) => built.get(n) !== undefined).sort();
  const plan: PlannedBuild[] = [];
  const rebuilt = new Set<string>();
  for (const name of buildOrder(defs, wanted)) {
    const chain = resolveChain(defs, name);
    const link = chain[chain.length - 1]!;
    const parentName = chain.length > 1 ? chain[chain.length - 2]!.template.def.name : undefined;
    const state = built.get(name);
    const f = freshness(
      link.hash,
      state,
      parentName ? { name: parentName, built: built.get(parentName) } : undefined,
    );
    let reason: PlannedBuild["reason"] | undefined;
    if (f === "missing") reason = "missing";
    else if (parentName && rebuilt.has(parentName) && opts.outOfSync) reason = "parent-rebuilt";
    else if (opts.outOfSync) reason = f === "current" ? undefined : f;
    else if (names.includes(name)) reason = "requested";
    else if (opts.withParents) reason = "with-parents";
    if (reason) {
      plan.push({ name, reason });
      rebuilt.add(name);
    }
  }
  return plan;
}
