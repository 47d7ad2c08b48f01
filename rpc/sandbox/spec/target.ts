/**
 * A mount's guest path in its normal form, for the spec's reader (mounts.ts) and the resolver
 * alike; apart from mounts.ts so the engine builds none of the spec's schemas (docs/decisions.md,
 * "The spec's schemas only where a spec is read"). Pure.
 *
 * @module
 */

/** The guest path with trailing `/` dropped (`/` stays `/`). */
export function normalTarget(target: string): string {
  const t = target.replace(/\/+$/, "");
  return t === "" ? "/" : t;
}
