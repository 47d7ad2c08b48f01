/**
 * Hand-written checks for the proxy's config and wire shapes (credentials.yaml, the proxy
 * block of config.yaml, egress secrets files, `/activity` bodies), in place of zod: the
 * proxy runs for days and zod would stay resident in it (~11 MiB, issue 11: footprint;
 * docs/decisions.md). Each check takes the value and its path and returns the typed value,
 * or throws `IsbError("invalid", "<path>: <what was expected>")`. Messages name the field
 * and the expectation, never the value (credentials pass through here). Pure.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** Where a value sits in its document: keys and indexes from the root. */
export type Path = readonly (string | number)[];

/** The path as `a.b.0.c` (`document` for the root). */
export function pathText(path: Path): string {
  return path.length ? path.join(".") : "document";
}

/** Throws the invalid-shape error at `path`. */
export function bad(path: Path, what: string): never {
  throw new IsbError("invalid", `${pathText(path)}: ${what}`);
}

const kind = (v: unknown) => v === null ? "null" : Array.isArray(v) ? "a list" : typeof v;

/** A mapping (not null, not a list). */
export function mapping(v: unknown, path: Path): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    bad(path, `expected a mapping, got ${kind(v)}`);
  }
  return v as Record<string, unknown>;
}

/** A mapping whose keys are all among `keys` (an unknown one is refused by name). */
export function strictMapping(
  v: unknown,
  path: Path,
  keys: readonly string[],
): Record<string, unknown> {
  const o = mapping(v, path);
  for (const k of Object.keys(o)) {
    if (!keys.includes(k)) bad([...path, k], `unknown field (expected ${keys.join(", ")})`);
  }
  return o;
}

/** A string, at least `min` long, matching `re` (`what` says what it must be). */
export function string(
  v: unknown,
  path: Path,
  opts: { min?: number; re?: RegExp; what?: string } = {},
): string {
  if (typeof v !== "string") bad(path, `expected ${opts.what ?? "a string"}, got ${kind(v)}`);
  if (v.length < (opts.min ?? 0)) {
    bad(path, opts.what ? `expected ${opts.what}` : `expected at least ${opts.min} characters`);
  }
  if (opts.re && !opts.re.test(v)) bad(path, `expected ${opts.what ?? `to match ${opts.re}`}`);
  return v;
}

/** An integer within [min, max]. */
export function integer(v: unknown, path: Path, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    bad(path, `expected an integer from ${min} to ${max}`);
  }
  return v;
}

/** A boolean. */
export function boolean(v: unknown, path: Path): boolean {
  if (typeof v !== "boolean") bad(path, `expected true or false, got ${kind(v)}`);
  return v;
}

/** A list, each item checked by `each` (with its index appended to the path). */
export function list<T>(
  v: unknown,
  path: Path,
  each: (x: unknown, path: Path) => T,
  min = 0,
): T[] {
  if (!Array.isArray(v)) bad(path, `expected a list, got ${kind(v)}`);
  if (v.length < min) bad(path, `expected at least ${min} item${min === 1 ? "" : "s"}`);
  return v.map((x, i) => each(x, [...path, i]));
}

/** `undefined` stays undefined (the field is absent); anything else goes through `check`. */
export function optional<T>(v: unknown, check: (v: unknown) => T): T | undefined {
  return v === undefined ? undefined : check(v);
}
