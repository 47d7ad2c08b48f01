/**
 * Which hosts the proxy intercepts, which credential goes where, and which requests are
 * model calls (shared/spec/isx-mcp.md §7.A, §7.C, §7.G). Pure: credentials and config in,
 * decisions out.
 *
 * Namespaces: `anthropic` (API key → `x-api-key`; OAuth → drop `x-api-key`, add
 * `Authorization: Bearer`), `openai` (`Authorization: Bearer`), `github` (Basic with the
 * token as password on `github.com`, which git speaks; `Authorization: Bearer` on the API
 * hosts). Other domains get the `custom` rules: exact domain first, then the most specific
 * `*.suffix`. The account is the instance's pin (`user.incus-spawn.account.<ns>`), else the
 * namespace default, else the only or first account; a pin naming a missing account
 * **fails closed** with 502 and never falls back.
 *
 * DNS sends a domain and all its subdomains to the proxy (dnsmasq `address=/d/`), so the
 * leaf certificate carries `d` and `*.d`; a subdomain with no rule of its own is relayed
 * without credentials (still counted).
 *
 * @module
 */

import type { ModelProvider } from "./activity.ts";
import type { AnthropicAccount, Credentials, TokenAccount } from "./credentials.ts";
import { allSecrets } from "./credentials.ts";
import type { HeaderOp } from "./rewrite.ts";
import type { Secret } from "./secret.ts";

/** A provider namespace with built-in injection rules. */
export type Namespace = "anthropic" | "openai" | "github";

/** A name a caller's grant can list: a namespace, or `custom` for the custom rules. */
export type GrantName = Namespace | "custom";

/** Every {@link GrantName}. */
export const GRANT_NAMES: readonly GrantName[] = ["anthropic", "openai", "github", "custom"];

/**
 * What a caller may be given: every credential, or those of the listed names only (none
 * when empty: its placeholders are relayed untouched). proxy/identity.ts decides it.
 */
export type Grant = "all" | readonly GrantName[];

/** True when `grant` covers `name`. */
export function granted(grant: Grant, name: GrantName): boolean {
  return grant === "all" || grant.includes(name);
}

/** The hosts of each namespace unless config overrides them. */
export const DEFAULT_HOSTS: Readonly<Record<Namespace, readonly string[]>> = {
  anthropic: ["api.anthropic.com"],
  openai: ["api.openai.com"],
  github: ["github.com", "api.github.com"],
};

/** Pin names accepted per namespace (the original calls Anthropic's `claude`). */
const PIN_KEYS: Record<Namespace, string[]> = {
  anthropic: ["anthropic", "claude"],
  openai: ["openai", "codex"],
  github: ["github"],
};

/** Model-call paths per namespace (query string excluded). */
const MODEL_PATHS: Partial<Record<Namespace, readonly string[]>> = {
  anthropic: ["/v1/messages"],
  openai: ["/v1/responses", "/v1/chat/completions"],
};

/** The `proxy:` config keys the policy reads. */
export interface PolicyConfig {
  /** Replace a namespace's hosts. */
  hosts?: { [K in Namespace]?: string[] | undefined };
  /** More intercepted domains (relayed and counted, credentials only by `custom` rules). */
  domains?: string[];
}

/** What to do with one intercepted request. */
export type Route =
  | { kind: "forward"; namespace?: Namespace; ops: HeaderOp[]; model?: ModelProvider }
  | { kind: "fail"; status: 502; message: string };

/** True when `host` matches `pattern`: exact, or `*.suffix` for strict subdomains. */
export function matchDomain(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase();
  const h = host.toLowerCase();
  if (p.startsWith("*.")) return h.endsWith(p.slice(1)) && h.length > p.length - 1;
  return p === h;
}

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

function pick<A>(
  ns: Namespace,
  accounts: { default: string | undefined; accounts: Map<string, A> },
  pins: Readonly<Record<string, string>>,
): { account?: A; error?: string } {
  const key = PIN_KEYS[ns].find((k) => pins[k] !== undefined);
  if (key !== undefined) {
    const name = pins[key]!;
    const account = accounts.accounts.get(name);
    return account
      ? { account }
      : { error: `account "${name}" for ${ns} is not in credentials.yaml` };
  }
  const name = accounts.default ?? accounts.accounts.keys().next().value;
  const account = name === undefined ? undefined : accounts.accounts.get(name);
  return account ? { account } : {};
}

/** The decisions, built once from the credentials file and the `proxy:` config. */
export class Policy {
  readonly #creds: Credentials;
  readonly #hosts: Record<Namespace, string[]>;
  readonly #domains: string[];
  readonly #secrets: Secret[];
  readonly #dnsNames: string[];

  /** Creates it (nothing runs until a start or a call). */
  constructor(creds: Credentials, config: PolicyConfig = {}) {
    this.#creds = creds;
    const lower = (xs: readonly string[]) => xs.map((x) => x.toLowerCase().replace(/\.$/, ""));
    this.#hosts = {
      anthropic: lower(config.hosts?.anthropic ?? DEFAULT_HOSTS.anthropic),
      openai: lower(config.hosts?.openai ?? DEFAULT_HOSTS.openai),
      github: lower(config.hosts?.github ?? DEFAULT_HOSTS.github),
    };
    const all = [
      ...Object.values(this.#hosts).flat(),
      ...creds.custom.map((r) => r.domain),
      ...lower(config.domains ?? []),
    ];
    this.#domains = [...new Set(all)].sort();
    this.#dnsNames = [...new Set(this.#domains.map(baseDomain))].sort();
    this.#secrets = allSecrets(creds);
  }

  /** Every intercepted domain pattern (what DNS maps and the certificate names). */
  get domains(): string[] {
    return [...this.#domains];
  }

  /** The base names for DNS `address=` lines. */
  dnsNames(): string[] {
    return [...this.#dnsNames];
  }

  /** The certificate's SANs: each base name and its one-level wildcard. */
  certNames(): string[] {
    return [...new Set(this.dnsNames().flatMap((d) => [d, `*.${d}`]))];
  }

  /** True when DNS sends `host` to the proxy (a domain or any subdomain of one). */
  covers(host: string): boolean {
    const h = hostOnly(host);
    return this.#dnsNames.some((d) => h === d || h.endsWith(`.${d}`));
  }

  /** Every real value (for scrubbing). */
  secrets(): Secret[] {
    return [...this.#secrets];
  }

  /** The providers whose model calls are counted. */
  providers(): ModelProvider[] {
    return ["anthropic", "openai"];
  }

  /** The namespace that owns `host`, if any. */
  namespaceOf(host: string): Namespace | undefined {
    const h = hostOnly(host);
    return (Object.keys(this.#hosts) as Namespace[]).find((ns) =>
      this.#hosts[ns].some((p) => matchDomain(p, h))
    );
  }

  /**
   * The decision for one request of a caller with this grant and these account pins. A
   * namespace the grant does not cover gets no credential (and no pin check).
   */
  route(
    req: { host: string; path: string },
    caller: { grant: Grant; pins?: Readonly<Record<string, string>> },
  ): Route {
    const pins = caller.pins ?? {};
    const host = hostOnly(req.host);
    const path = req.path.split("?")[0]!;
    const ns = this.namespaceOf(host);
    if (!ns) {
      return { kind: "forward", ops: granted(caller.grant, "custom") ? this.#custom(host) : [] };
    }
    const model = MODEL_PATHS[ns]?.includes(path) ? ns as ModelProvider : undefined;
    const base = { kind: "forward" as const, namespace: ns, ...(model ? { model } : {}) };
    if (!granted(caller.grant, ns)) return { ...base, ops: [] };
    if (ns === "anthropic") {
      const got = pick<AnthropicAccount>(ns, this.#creds.anthropic, pins);
      if (got.error) return { kind: "fail", status: 502, message: got.error };
      const a = got.account;
      if (!a) return { ...base, ops: [] };
      return {
        ...base,
        ops: a.kind === "oauth"
          ? [{ op: "delete", name: "x-api-key" }, {
            op: "set",
            name: "authorization",
            value: a.value,
            prefix: "Bearer ",
          }]
          : [{ op: "delete", name: "authorization" }, {
            op: "set",
            name: "x-api-key",
            value: a.value,
          }],
      };
    }
    const got = pick<TokenAccount>(
      ns,
      ns === "openai" ? this.#creds.openai : this.#creds.github,
      pins,
    );
    if (got.error) return { kind: "fail", status: 502, message: got.error };
    const a = got.account;
    if (!a) return { ...base, ops: [] };
    if (ns === "github" && host === "github.com") {
      return {
        ...base,
        ops: [{ op: "basic", value: a.value, user: "x-access-token", keepGuestUser: true }],
      };
    }
    return {
      ...base,
      ops: [{ op: "set", name: "authorization", value: a.value, prefix: "Bearer " }],
    };
  }

  #custom(host: string): HeaderOp[] {
    const rules = this.#creds.custom.filter((r) => matchDomain(r.domain, host));
    const exact = rules.find((r) => !r.domain.startsWith("*."));
    const rule = exact ?? rules.sort((a, b) => b.domain.length - a.domain.length)[0];
    if (!rule) return [];
    switch (rule.kind) {
      case "header":
        return [{ op: "set", name: rule.header, value: rule.value }];
      case "bearer":
        return [{ op: "set", name: "authorization", value: rule.value, prefix: "Bearer " }];
      case "basic":
        return [{ op: "basic", value: rule.value, user: rule.user }];
    }
  }
}
