/**
 * The permission flags a launcher (`cli/flags.ts` for `bin/`) and the process tests start
 * the program with: the union of the table's grants (permissions.ts), plus, for the one mode
 * with read denials (rpc: `isb`, `isx rpc`), `--deny-read` of them with their paths taken out
 * of the allow lists (in Deno an allowed sub-path wins over a denied parent). The compiled
 * binary records the plain union; there `enterMode` revokes instead (fails closed).
 *
 * @module
 */

import type { PermContext } from "./perm_context.ts";
import {
  covers,
  grantFlags,
  type Mode,
  PERMISSIONS,
  unionFlags,
  unionGrants,
  uniq,
} from "./permissions.ts";

/** The mode with read denials an invocation enters: `rpc` for `isb` and `isx rpc`. */
export function launchMode(prog: string, command: string | undefined): Mode | undefined {
  return prog === "isb" || command === "rpc" ? "rpc" : undefined;
}

/** The flags to start with for `mode` (see {@link launchMode}); the union when none. */
export function launchFlags(c: PermContext, mode?: Mode): string[] {
  const deny = mode ? PERMISSIONS[mode](c).denyRead ?? [] : [];
  if (!deny.length) return unionFlags(c);
  const g = unionGrants(c);
  const keep = (xs: string[]) => xs.filter((x) => !deny.some((d) => covers(d, x)));
  const flags = grantFlags({ ...g, read: keep(g.read), write: keep(g.write) });
  return [...flags, `--deny-read=${uniq(deny).join(",")}`];
}
