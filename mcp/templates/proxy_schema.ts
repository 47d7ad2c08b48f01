/**
 * The schema of a tool's `proxy:` rules (credential rules the host proxy applies; see
 * proxy_rules.ts and docs/proxy.md). Strict where a value reaches an upstream request head:
 * no line breaks or control characters in values, no `Host`, framing or hop-by-hop header
 * names, lowercase domains with a dot. Pure.
 *
 * @module
 */

import * as z from "zod";

/** A domain a tool's proxy rule covers: a name with a dot, or `*.` and one. */
const DOMAIN_RE = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/;
/** A header value: printable ASCII, no line breaks (nothing can be smuggled into the head). */
const HEADER_VALUE_RE = /^[\x20-\x7e]+$/;
/** Headers a tool may not set: framing, routing and hop-by-hop ones. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "upgrade",
  "te",
  "trailer",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "x-isx-instance-secret",
]);

function build() {
  const domain = z.string().regex(DOMAIN_RE, {
    error: 'a lowercase domain like api.example.com, or "*.example.com" for its subdomains',
  });
  /** A header value (also `configuration:` values). */
  const headerValue = z.string().regex(HEADER_VALUE_RE, {
    error: "a non-empty value without line breaks or control characters",
  });

  /**
   * A credential value of a rule: the value, or `{ command: [argv], ttl }` printing it (run by
   * the proxy without a shell; allowed in the user's own tools only: proxy_rules.ts).
   */
  const ruleValue = z.union([
    headerValue,
    z.strictObject({
      command: z.array(z.string().min(1)).min(1, { error: "a program and its arguments" }),
      ttl: z.union([z.string(), z.number()]).optional(),
    }),
  ]);

  /** A credential rule the proxy applies to a domain (`proxy:` in a tool). */
  const ProxyRuleSchema = z.union([
    z.strictObject({ domain, bearer: ruleValue }),
    z.strictObject({
      domain,
      header: z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, { error: "a header name" })
        .refine((h) => !RESERVED_HEADERS.has(h.toLowerCase()), {
          error: "a header the proxy does not reserve (not Host, framing or hop-by-hop ones)",
        }),
      value: ruleValue,
    }),
    z.strictObject({
      domain,
      basic: z.strictObject({
        user: z.string().regex(/^[\x20-\x39\x3b-\x7e]*$/, {
          error: "a printable user name without ':'",
        }),
        password: ruleValue,
      }),
    }),
  ], { error: "a rule with domain and one of bearer, header + value, or basic: {user, password}" });
  return { headerValue, ProxyRuleSchema };
}

let built: ReturnType<typeof build> | undefined;

/**
 * The schemas, built on first use (a start that reads no user tool builds none: the built-ins
 * are checked by builtin_test.ts): `headerValue` (also `configuration:` values) and
 * `ProxyRuleSchema`, a credential rule the proxy applies to a domain (`proxy:` in a tool).
 */
export function proxySchemas(): ReturnType<typeof build> {
  return (built ??= build());
}
