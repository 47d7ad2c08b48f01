/**
 * Host names as the policy compares them: each namespace's default hosts, the base name DNS
 * maps for a pattern, and the host of a Host header or URL authority. Pure.
 *
 * @module
 */

import type { Namespace } from "./accounts.ts";

/** The hosts of each namespace unless config overrides them. */
export const DEFAULT_HOSTS: Readonly<Record<Namespace, readonly string[]>> = {
  anthropic: ["api.anthropic.com"],
  openai: ["api.openai.com"],
  github: ["github.com", "api.github.com"],
};

/** The base name DNS maps for a domain pattern (`*.x.com` → `x.com`). */
export function baseDomain(pattern: string): string {
  return pattern.toLowerCase().replace(/^\*\./, "");
}

/** A host name from a Host header or URL authority: lower case, no port, no trailing dot. */
export function hostOnly(authority: string): string {
  let h = authority.trim().toLowerCase();
  if (h.startsWith("[")) h = h.slice(1, h.indexOf("]"));
  else if (h.lastIndexOf(":") > 0 && h.indexOf(":") === h.lastIndexOf(":")) {
    h = h.slice(0, h.lastIndexOf(":"));
  }
  return h.replace(/\.$/, "");
}
