/**
 * What a caller's grant may list (a provider namespace, or `custom` for the custom rules)
 * and the one test of it; proxy/callers/_identity.ts decides each caller's grant, the
 * policy applies it. Pure.
 *
 * @module
 */

import type { Namespace } from "./accounts.ts";

/** A name a caller's grant can list: a namespace, or `custom` for the custom rules. */
export type GrantName = Namespace | "custom";

/** Every {@link GrantName}. */
export const GRANT_NAMES: readonly GrantName[] = ["anthropic", "openai", "github", "custom"];

/**
 * What a caller may be given: every credential, or those of the listed names only (none
 * when empty: its placeholders are relayed untouched). proxy/callers/_identity.ts decides it.
 */
export type Grant = "all" | readonly GrantName[];

/** True when `grant` covers `name`. */
export function granted(grant: Grant, name: GrantName): boolean {
  return grant === "all" || grant.includes(name);
}
