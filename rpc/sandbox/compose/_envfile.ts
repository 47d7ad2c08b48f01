/**
 * The dotenv format of compose env files (isb-rpc.md §12.3): `KEY=VALUE` lines; blank and
 * `#` lines skipped; an optional `export ` prefix; one matching pair of `"` or `'` around the
 * value stripped; no expansion and no inline comments. Pure.
 *
 * @module
 */

import { invalid } from "../../errors.ts";

/** Parses an env file's text into pairs, in order. Throws `invalid` naming the line. */
export function parseEnvFile(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const [n, raw] of text.split(/\r?\n/).entries()) {
    let line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("export ")) line = line.slice("export ".length);
    const eq = line.indexOf("=");
    if (eq < 0) throw invalid(`env file line ${n + 1}: expected KEY=VALUE`);
    let v = line.slice(eq + 1).trim();
    if (v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0])) v = v.slice(1, -1);
    out.push([line.slice(0, eq).trim(), v]);
  }
  return out;
}
