/**
 * The YAML reader's scalars (rpc/yaml.ts): quoted values with their escapes and line
 * folding, the core schema's reading of a plain value, keys, and `>` folding; with the one
 * error constructor both the block reader and the flow reader (`_yaml_flow.ts`) use. Apart
 * from the block structure because both readers share them and they are where the escape
 * and number rules live. Errors name the line and never quote the text. Pure.
 *
 * @module
 */

import { IsbError } from "./errors.ts";

/** Throws the reader's parse error for line `n` (never quoting the text). */
export function fail(n: number, what: string): never {
  throw new IsbError("parse", `line ${n}: ${what}`);
}

/** The refusal for what the subset leaves out. */
export const NOT_SUPPORTED = "anchors, aliases, tags and ? keys are not supported";

const ESCAPES: Record<string, string> = {
  "0": "\0",
  a: "\x07",
  b: "\b",
  t: "\t",
  "\t": "\t",
  n: "\n",
  v: "\v",
  f: "\f",
  r: "\r",
  e: "\x1b",
  " ": " ",
  '"': '"',
  "/": "/",
  "\\": "\\",
  N: "\x85",
  _: "\xa0",
  L: "\u2028",
  P: "\u2029",
};

/** A quoted scalar starting at `at`; over lines in flow text, folded as YAML folds them. */
export function quoted(s: string, at: number, n: number): { value: string; end: number } {
  const q = s[at]!;
  let out = "";
  let i = at + 1;
  while (i < s.length) {
    const c = s[i]!;
    if (c === q) {
      if (q === "'" && s[i + 1] === "'") {
        out += "'";
        i += 2;
        continue;
      }
      return { value: out, end: i + 1 };
    }
    if (c === "\n") {
      // a line break folds to a space, blank lines to newlines; indentation is dropped
      out = out.replace(/[ \t]+$/, "");
      let breaks = 0;
      while (i < s.length && /[\s]/.test(s[i]!)) breaks += s[i++] === "\n" ? 1 : 0;
      out += breaks > 1 ? "\n".repeat(breaks - 1) : " ";
      continue;
    }
    if (q === '"' && c === "\\") {
      const e = s[i + 1];
      const hex = e === "x" ? 2 : e === "u" ? 4 : e === "U" ? 8 : 0;
      if (hex) {
        const h = s.slice(i + 2, i + 2 + hex);
        if (!/^[0-9a-fA-F]+$/.test(h) || h.length !== hex) fail(n, "a bad \\x, \\u or \\U escape");
        out += String.fromCodePoint(parseInt(h, 16));
        i += 2 + hex;
        continue;
      }
      if (e === "\n") {
        i += 2;
        while (i < s.length && /[ \t]/.test(s[i]!)) i++;
        continue;
      }
      if (e === undefined) break;
      if (!(e in ESCAPES)) fail(n, "an unknown escape in a double-quoted value");
      out += ESCAPES[e];
      i += 2;
      continue;
    }
    out += c;
    i++;
  }
  fail(n, "a quoted value is not closed on its line");
}

/** The core schema's reading of a plain scalar. */
export function resolvePlain(s: string): unknown {
  if (s === "" || s === "~" || /^(null|Null|NULL)$/.test(s)) return null;
  if (/^(true|True|TRUE)$/.test(s)) return true;
  if (/^(false|False|FALSE)$/.test(s)) return false;
  if (/^[-+]?[0-9]+$/.test(s)) return Number(s.replace(/^\+/, ""));
  if (/^0x[0-9a-fA-F]+$/.test(s)) return parseInt(s.slice(2), 16);
  if (/^0o[0-7]+$/.test(s)) return parseInt(s.slice(2), 8);
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(s)) return Number(s);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(s)) return s.startsWith("-") ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(s)) return NaN;
  return s;
}

/** `>` folding: a break between two plain lines is a space, blank lines are newlines. */
export function folded(body: string[]): string {
  let out = "";
  let prev: string | undefined;
  let blanks = 0;
  for (const cur of body) {
    if (cur.trim() === "") {
      blanks++;
      continue;
    }
    if (prev === undefined) out += "\n".repeat(blanks);
    else if (!/^\s/.test(prev) && !/^\s/.test(cur)) out += blanks ? "\n".repeat(blanks) : " ";
    else out += "\n".repeat(blanks + 1);
    out += cur;
    prev = cur;
    blanks = 0;
  }
  return out;
}

/** A mapping key as written: quoted, or a plain scalar as the core schema reads it. */
export function keyOf(raw: string, n: number): string {
  if (raw === "") fail(n, "a key is empty");
  if (/^[&*!?]/.test(raw)) fail(n, NOT_SUPPORTED);
  if (raw[0] === '"' || raw[0] === "'") {
    const q = quoted(raw, 0, n);
    if (q.end !== raw.length) fail(n, "unexpected text after a quoted key");
    return q.value;
  }
  return String(resolvePlain(raw));
}

/** Sets `o[key]` as an own data property (a `__proto__` key stays data). */
export function define(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}
