/**
 * Whether a browser test may run: the browser is installed. Outside CI a missing browser
 * ignores the test (a developer's machine may have none); in CI (`CI` set, as
 * scripts/test.sh sets it after installing chromium and firefox-esr) it throws, so a
 * browser the set-up failed to install fails the run instead of passing as a skipped test,
 * as a missing Incus does (tests/helpers/live_gate.ts).
 *
 * @module
 */

import { ciRequiresIncus } from "./live_gate.ts";

/** True when `path` is an installed browser; throws in CI when it is not. */
export function browserPresent(path: string): boolean {
  try {
    if (Deno.statSync(path).isFile) return true;
  } catch {
    // missing: below
  }
  if (ciRequiresIncus(Deno.env.get("CI"))) {
    throw new Error(`CI requires the browser ${path} (scripts/test.sh installs it)`);
  }
  return false;
}
