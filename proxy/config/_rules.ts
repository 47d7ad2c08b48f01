/**
 * Header rules for domains outside the provider namespaces: credentials.yaml's `custom:`
 * and tools' `proxy:` (shared/spec/isx-mcp.md §7.G). The exact domain's rule wins, else
 * the most specific `*.suffix` (the longest pattern); among equals the first listed, so
 * the credentials file, listed first, beats a tool. Pure.
 *
 * @module
 */

import type { CustomRule, Value } from "./credentials.ts";
import { type HeaderOp, utf8Base64 } from "../relay/rewrite.ts";
import { Secret } from "./secret.ts";

/** True when `host` matches `pattern`: exact, or `*.suffix` for strict subdomains. */
export function matchDomain(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase();
  const h = host.toLowerCase();
  if (p.startsWith("*.")) return h.endsWith(p.slice(1)) && h.length > p.length - 1;
  return p === h;
}

/** The rule that applies to `host`, if any. */
export function ruleFor(rules: readonly CustomRule[], host: string): CustomRule | undefined {
  const hits = rules.filter((r) => matchDomain(r.domain, host));
  const exact = hits.find((r) => !r.domain.startsWith("*."));
  // A stable sort keeps the listed order among patterns of one length.
  return exact ?? hits.sort((a, b) => b.domain.length - a.domain.length)[0];
}

/** The header operations of the rule for `host` (none without a rule). */
export function ruleOps(rules: readonly CustomRule[], host: string): HeaderOp<Value>[] {
  const rule = ruleFor(rules, host);
  switch (rule?.kind) {
    case undefined:
      return [];
    case "header":
      return [{ op: "set", name: rule.header, value: rule.value }];
    case "bearer":
      return [{ op: "set", name: "authorization", value: rule.value, prefix: "Bearer " }];
    case "basic":
      return [{ op: "basic", value: rule.value, user: rule.user }];
  }
}

/** Fixed-user Basic headers as values of their own: a server echoing one back reveals it. */
export function basicHeaderSecrets(rules: readonly CustomRule[]): Secret[] {
  return rules.flatMap((r) =>
    r.kind === "basic" && r.value instanceof Secret ? [basicSecret(r.user, r.value)] : []
  );
}

/** The Basic header value `user:value` makes (scrubbed like the value itself). */
export function basicSecret(user: string, value: Secret): Secret {
  return new Secret(utf8Base64(`${user}:${value.reveal()}`));
}
