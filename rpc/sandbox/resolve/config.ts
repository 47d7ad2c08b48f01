/**
 * Config values that need translating before incus sees them: docker memory sizes to incus
 * units, and an argv quoted for `oci.entrypoint` (which incus splits on whitespace with
 * quotes grouping and no escape character). Pure; each throws `invalid` with the reason.
 *
 * @module
 */

import { invalid } from "../../errors.ts";

const MEMORY_UNITS: Record<string, string> = {
  "": "",
  b: "",
  k: "KiB",
  kb: "KiB",
  m: "MiB",
  mb: "MiB",
  g: "GiB",
  gb: "GiB",
  t: "TiB",
  tb: "TiB",
};

/**
 * A docker memory size (`512m`, `8g`, `8GB`, bytes) in incus units (`512MiB`, `8GiB`, bytes);
 * `KiB|MiB|GiB|TiB|%` pass through. Docker units are binary; decimals are rejected.
 */
export function memoryLimit(m: string): string {
  const t = m.trim();
  const match = /^([0-9.]*)\s*(.*)$/.exec(t)!;
  const num = match[1]!;
  const unit = match[2]!;
  if (num === "" || !/^[0-9]+$/.test(num)) {
    throw invalid(`${JSON.stringify(m)} is not a whole size (e.g. 512m, 8g, 8GiB)`);
  }
  const lower = unit.toLowerCase();
  if (["%", "kib", "mib", "gib", "tib"].includes(lower)) return t;
  const suffix = MEMORY_UNITS[lower];
  if (suffix === undefined) {
    throw invalid(
      `${JSON.stringify(m)}: unknown unit ${
        JSON.stringify(unit)
      } (b, k, m, g, t, KiB, MiB, GiB, TiB or %)`,
    );
  }
  return `${num}${suffix}`;
}

/** argv quoted for `oci.entrypoint`; an argument with both `'` and `"` cannot be carried. */
export function ociCommandLine(argv: string[]): string {
  return argv.map((a) => {
    if (a !== "" && !/[\s"']/.test(a)) return a;
    if (!a.includes('"')) return `"${a}"`;
    if (!a.includes("'")) return `'${a}'`;
    throw invalid(
      `argument ${
        JSON.stringify(a)
      } has both ' and " in it, which an OCI command line cannot carry; use a script`,
    );
  }).join(" ");
}
