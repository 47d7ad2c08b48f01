/**
 * Compose-style variable interpolation (isb-rpc.md §12.3): `$VAR`, `${VAR}`, `${VAR:-d}`,
 * `${VAR-d}`, `${VAR:?m}`, `${VAR?m}`, `${VAR:+alt}`, `${VAR+alt}`, `$$`; defaults, messages
 * and alternates may nest. An unset variable with no default is an error, not "": an empty
 * bind path or label is worse than a failed parse.
 *
 * It runs on the string scalars and mapping keys of a parsed tree ({@link interpolateTree}),
 * never on raw text, so a value cannot inject YAML structure. Errors are `interpolation`
 * (`interpolation: <detail>`); the loader turns them into `parse` errors naming the file.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";

/** Looks a variable up; undefined when unset. */
export type Lookup = (name: string) => string | undefined;

function fail(detail: string): never {
  throw new IsbError("interpolation", `interpolation: ${detail}`);
}

function unset(name: string): never {
  return fail(
    `variable ${name} is not set (use \${${name}:-default} to allow that, or $$${name} for a ` +
      "literal $ that a shell in the command should see)",
  );
}

const NAME_START = /[A-Za-z_]/;
const NAME_CHAR = /[A-Za-z0-9_]/;

/** Index of the `}` closing a `${` whose body starts at `start`, honouring nesting. */
function findClose(s: string, start: number): number | undefined {
  let depth = 1;
  for (let i = start; i < s.length; i++) {
    if (s[i] === "$" && s[i + 1] === "{") {
      depth++;
      i++;
    } else if (s[i] === "}" && --depth === 0) return i;
  }
  return undefined;
}

/** Interpolates one string. Throws `interpolation`. */
export function interpolate(s: string, lookup: Lookup): string {
  let out = "";
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c !== "$") {
      out += c;
      i++;
      continue;
    }
    const n = s[i + 1];
    if (n === "$") {
      out += "$";
      i += 2;
    } else if (n === "{") {
      const end = findClose(s, i + 2);
      if (end === undefined) fail(`unterminated \${ in ${JSON.stringify(s)}`);
      out += braced(s.slice(i + 2, end), lookup);
      i = end + 1;
    } else if (n !== undefined && NAME_START.test(n)) {
      let j = i + 1;
      while (j < s.length && NAME_CHAR.test(s[j]!)) j++;
      const name = s.slice(i + 1, j);
      out += lookup(name) ?? unset(name);
      i = j;
    } else {
      out += "$"; // a lone `$` is literal, as in compose
      i++;
    }
  }
  return out;
}

function braced(inner: string, lookup: Lookup): string {
  let end = 0;
  while (end < inner.length && NAME_CHAR.test(inner[end]!)) end++;
  const name = inner.slice(0, end);
  if (name === "" || !NAME_START.test(name[0]!)) fail(`invalid variable name in \${${inner}}`);
  const rest = inner.slice(end);
  const val = lookup(name);
  if (rest === "") return val ?? unset(name);
  const op = [":-", ":?", ":+", "-", "?", "+"].find((o) => rest.startsWith(o));
  if (op === undefined) fail(`unsupported expansion \${${inner}}`);
  const arg = rest.slice(op.length);
  const setNonEmpty = val !== undefined && val !== "";
  const isSet = val !== undefined;
  switch (op) {
    case ":-":
      return setNonEmpty ? val : interpolate(arg, lookup);
    case "-":
      return isSet ? val : interpolate(arg, lookup);
    case ":?":
    case "?": {
      if (op === ":?" ? setNonEmpty : isSet) return val!;
      const msg = interpolate(arg, lookup);
      return fail(msg === "" ? `${name} is required` : `${name}: ${msg}`);
    }
    case ":+":
      return setNonEmpty ? interpolate(arg, lookup) : "";
    default:
      return isSet ? interpolate(arg, lookup) : "";
  }
}

/** Interpolates every string scalar and mapping key of a parsed tree (a new tree). */
export function interpolateTree(v: unknown, lookup: Lookup): unknown {
  if (typeof v === "string") return interpolate(v, lookup);
  if (Array.isArray(v)) return v.map((x) => interpolateTree(x, lookup));
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      out[interpolate(k, lookup)] = interpolateTree(x, lookup);
    }
    return out;
  }
  return v;
}
