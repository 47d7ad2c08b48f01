/**
 * Exec defaults (`sandbox.exec`'s `defaults`, a resolved spec's `exec`): apart from parts.ts
 * so `sandbox.exec`'s params need the scalars alone, not the rest of the spec's schemas
 * (docs/decisions.md, "The spec's schemas only where a spec is read").
 *
 * @module
 */

import * as z from "zod";
import { Bool, IntOrString, StringMap } from "./scalars.ts";

/** Exec defaults (`sandbox.exec`'s `defaults`, resolved specs' `exec`). */
export interface ExecDefaults {
  /** Who execs run as: `NAME`, `UID`, `UID:GID` or `NAME:GROUP` (default root). */
  user?: string;
  /** The working directory of execs (default the user's home). */
  cwd?: string;
  /** Variables added to every exec's environment. */
  env?: Record<string, string>;
  /** Execs run through the user's login shell. */
  login?: true;
}

/** Exec defaults as a client writes them (lenient). */
export const ExecDefaultsSchema = z.strictObject({
  user: IntOrString.optional(),
  cwd: z.string().optional(),
  env: StringMap.optional(),
  login: Bool.optional(),
}).transform((d): ExecDefaults => {
  const out: ExecDefaults = {};
  if (d.user !== undefined) out.user = d.user;
  if (d.cwd !== undefined) out.cwd = d.cwd;
  if (d.env && Object.keys(d.env).length > 0) out.env = d.env;
  if (d.login) out.login = true;
  return out;
});
