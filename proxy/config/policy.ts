/**
 * Which hosts the proxy intercepts, which credential goes where, and which requests are
 * model calls (shared/spec/isx-mcp.md §7.A, §7.C, §7.G). Pure: credentials and config in,
 * decisions out.
 *
 * Namespaces: `anthropic` (API key → `x-api-key`; OAuth → drop `x-api-key`, add
 * `Authorization: Bearer`), `openai` (`Authorization: Bearer`), `github` (Basic with the
 * token as password on `github.com`, which git speaks; `Authorization: Bearer` on the API
 * hosts). Other domains get the header rules of credentials.yaml's `custom:` and of tools'
 * `proxy:` (user and search-path layers only; the file's own rules win a tie): exact domain
 * first, then the most specific `*.suffix`. The account is resolved by proxy/config/accounts.ts
 * (pin > template `accounts:` > default), which fails closed (502) and never falls back.
 *
 * An Anthropic account of kind `vertex` sends `/v1/messages` to Vertex AI (translated by
 * proxy/config/vertex.ts, with a token from its command), other Anthropic paths on as they are
 * without a credential, and adds its token to requests a guest sends to its Vertex host
 * itself; Vertex model paths are counted (§7.C).
 *
 * DNS sends a domain and all its subdomains to the proxy (dnsmasq `address=/d/`), so the
 * leaf certificate carries `d` and `*.d`; a subdomain with no rule of its own is relayed
 * without credentials (still counted).
 *
 * @module
 */

import type { ModelProvider } from "../activity/activity.ts";
import {
  type AccountCatalogue,
  accountCatalogue,
  type AccountChoices,
  type Namespace,
  resolveAccount,
} from "./accounts.ts";
import type {
  AnthropicAccount,
  Credentials,
  CustomRule,
  TokenAccount,
  Value,
  VertexConfig,
} from "./credentials.ts";
import { allSecrets } from "./credentials.ts";
import type { HeaderOp } from "../relay/rewrite.ts";
import { basicHeaderSecrets, matchDomain, ruleOps } from "./_rules.ts";
import { Secret } from "./secret.ts";
import { isVertexModelPath, vertexHost } from "./vertex.ts";

import { baseDomain, DEFAULT_HOSTS, hostOnly } from "./_hosts.ts";
import { type Grant, granted } from "./_grants.ts";

export type { Namespace } from "./accounts.ts";
export { matchDomain } from "./_rules.ts";
export { GRANT_NAMES, granted } from "./_grants.ts";
export type { Grant, GrantName } from "./_grants.ts";
export { baseDomain, DEFAULT_HOSTS, hostOnly } from "./_hosts.ts";

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
  /** Header rules declared by tools (`proxy:` in tool YAML; user and search-path layers). */
  toolRules?: CustomRule[];
}

/** What a Vertex account does with a request (see proxy/config/vertex.ts). */
export interface VertexRoute {
  /** The account's project, region and token command. */
  config: VertexConfig;
  /** `translate`: `/v1/messages` to `:rawPredict`; `passthrough`: a Vertex-shaped request. */
  mode: "translate" | "passthrough";
}

/** What to do with one intercepted request. */
export type Route =
  | {
    kind: "forward";
    namespace?: Namespace;
    /** The head changes; a value may still be a command to run (admit resolves it). */
    ops: HeaderOp<Value>[];
    model?: ModelProvider;
    /** Set when a Vertex token must be added (and, for `translate`, the request rewritten). */
    vertex?: VertexRoute;
  }
  | { kind: "fail"; status: 502; message: string };

/** What one generation of credentials and config decides from (replaced whole on reload). */
interface State {
  creds: Credentials;
  hosts: Record<Namespace, string[]>;
  domains: string[];
  secrets: Secret[];
  dnsNames: string[];
  rules: CustomRule[];
  vertexHosts: Map<string, VertexConfig>;
}

function build(creds: Credentials, config: PolicyConfig): State {
  const lower = (xs: readonly string[]) => xs.map((x) => x.toLowerCase().replace(/\.$/, ""));
  const hosts = {
    anthropic: lower(config.hosts?.anthropic ?? DEFAULT_HOSTS.anthropic),
    openai: lower(config.hosts?.openai ?? DEFAULT_HOSTS.openai),
    github: lower(config.hosts?.github ?? DEFAULT_HOSTS.github),
  };
  // The credentials file's own rules come first, so they win a tie with a tool's.
  const rules = [...creds.custom, ...(config.toolRules ?? [])];
  const vertexHosts = new Map<string, VertexConfig>();
  for (const a of creds.anthropic.accounts.values()) {
    if (a.kind === "vertex") vertexHosts.set(vertexHost(a.vertex.region), a.vertex);
  }
  const all = [
    ...Object.values(hosts).flat(),
    ...rules.map((r) => r.domain),
    ...vertexHosts.keys(),
    ...lower(config.domains ?? []),
  ];
  const domains = [...new Set(all)].sort();
  return {
    creds,
    hosts,
    rules,
    vertexHosts,
    domains,
    dnsNames: [...new Set(domains.map(baseDomain))].sort(),
    secrets: [
      ...allSecrets(creds),
      ...(config.toolRules ?? []).flatMap((r) => r.value instanceof Secret ? [r.value] : []),
      ...basicHeaderSecrets(rules),
    ],
  };
}

/**
 * The decisions, built from the credentials file and the `proxy:` config, and rebuilt whole
 * by {@link Policy.update} when they change (a live reload). Each call reads one
 * generation, so a request's route never mixes two; values of earlier generations stay in
 * {@link Policy.secrets}, so a response quoting a rotated key is still scrubbed.
 */
export class Policy {
  #s: State;
  readonly #retired: Secret[] = [];
  #generation = 1;

  /** Creates it (nothing runs until a start or a call). */
  constructor(creds: Credentials, config: PolicyConfig = {}) {
    this.#s = build(creds, config);
  }

  /** Replaces the credentials and config in force; true when the DNS names changed. */
  update(creds: Credentials, config: PolicyConfig = {}): boolean {
    const next = build(creds, config);
    for (const old of this.#s.secrets) {
      const kept = next.secrets.some((n) => n.equals(old)) ||
        this.#retired.some((r) => r.equals(old));
      if (!kept) this.#retired.push(old);
    }
    const dnsChanged = next.dnsNames.join(",") !== this.#s.dnsNames.join(",");
    this.#s = next;
    this.#generation++;
    return dnsChanged;
  }

  /** How many credential generations this policy has held (1 until the first reload). */
  get generation(): number {
    return this.#generation;
  }

  /** The credentials in force. */
  get credentials(): Credentials {
    return this.#s.creds;
  }

  /** Every intercepted domain pattern (what DNS maps and the certificate names). */
  get domains(): string[] {
    return [...this.#s.domains];
  }

  /** The base names for DNS `address=` lines. */
  dnsNames(): string[] {
    return [...this.#s.dnsNames];
  }

  /** The certificate's SANs: each base name and its one-level wildcard. */
  certNames(): string[] {
    return [...new Set(this.dnsNames().flatMap((d) => [d, `*.${d}`]))];
  }

  /** True when DNS sends `host` to the proxy (a domain or any subdomain of one). */
  covers(host: string): boolean {
    const h = hostOnly(host);
    return this.#s.dnsNames.some((d) => h === d || h.endsWith(`.${d}`));
  }

  /** The accounts by namespace: names, kinds and defaults, never values (`GET /accounts`). */
  accountCatalogue(): AccountCatalogue {
    return accountCatalogue(this.#s.creds);
  }

  /** Every literal value, in force or retired by a reload (for scrubbing). */
  secrets(): Secret[] {
    return [...this.#s.secrets, ...this.#retired];
  }

  /** The providers whose model calls are counted. */
  providers(): ModelProvider[] {
    return ["anthropic", "openai"];
  }

  /** The namespace that owns `host`, if any. */
  namespaceOf(host: string): Namespace | undefined {
    const h = hostOnly(host);
    return (Object.keys(this.#s.hosts) as Namespace[]).find((ns) =>
      this.#s.hosts[ns].some((p) => matchDomain(p, h))
    );
  }

  /** True when a request must go through the buffering path (a Vertex translation). */
  translates(host: string, path: string): boolean {
    return this.#s.vertexHosts.size > 0 && this.namespaceOf(host) === "anthropic" &&
      path.split("?")[0] === "/v1/messages";
  }

  /**
   * The decision for one request of a caller with this grant, these account pins and its
   * template's accounts. A namespace the grant does not cover gets no credential (and no
   * pin check); Vertex counts as `anthropic`, tools' rules as `custom`.
   */
  route(
    req: { host: string; path: string },
    caller: {
      grant: Grant;
      pins?: Readonly<Record<string, string>>;
      templateAccounts?: Readonly<Record<string, string>>;
    },
  ): Route {
    const pins = caller.pins ?? {};
    const template = caller.templateAccounts ?? {};
    const host = hostOnly(req.host);
    const path = req.path.split("?")[0]!;
    const choices: AccountChoices = { pins, template };
    if (this.#s.vertexHosts.has(host)) {
      if (!granted(caller.grant, "anthropic")) {
        return { kind: "forward", ops: [], ...this.#vertexModel(path) };
      }
      return this.#vertexPassthrough(host, path, choices);
    }
    const ns = this.namespaceOf(host);
    if (!ns) {
      return {
        kind: "forward",
        ops: granted(caller.grant, "custom") ? ruleOps(this.#s.rules, host) : [],
      };
    }
    const model = MODEL_PATHS[ns]?.includes(path) ? ns as ModelProvider : undefined;
    const base = { kind: "forward" as const, namespace: ns, ...(model ? { model } : {}) };
    if (!granted(caller.grant, ns)) return { ...base, ops: [] };
    if (ns === "anthropic") {
      const got = resolveAccount<AnthropicAccount>(ns, this.#s.creds.anthropic, choices);
      if (got.error) return { kind: "fail", status: 502, message: got.error };
      const a = got.account;
      if (!a) return { ...base, ops: [] };
      if (a.kind === "vertex") {
        // Not a model call: sent on to Anthropic as it is, the placeholder removed.
        const strip: HeaderOp<Value>[] = [{ op: "delete", name: "x-api-key" }];
        if (path !== "/v1/messages") return { ...base, ops: strip };
        return { ...base, ops: strip, vertex: { config: a.vertex, mode: "translate" } };
      }
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
    const got = resolveAccount<TokenAccount>(
      ns,
      ns === "openai" ? this.#s.creds.openai : this.#s.creds.github,
      choices,
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

  #vertexModel(path: string): { model?: "anthropic" } {
    return isVertexModelPath(path) ? { model: "anthropic" } : {};
  }

  /** A request a guest sends to a Vertex host itself: the caller's Vertex account's token. */
  #vertexPassthrough(host: string, path: string, choices: AccountChoices): Route {
    const got = resolveAccount<AnthropicAccount>("anthropic", this.#s.creds.anthropic, choices);
    if (got.error) return { kind: "fail", status: 502, message: got.error };
    const a = got.account;
    const model = this.#vertexModel(path);
    if (a?.kind !== "vertex" || vertexHost(a.vertex.region) !== host) {
      return { kind: "forward", ops: [], ...model };
    }
    return {
      kind: "forward",
      ops: [{ op: "delete", name: "x-api-key" }],
      ...model,
      vertex: { config: a.vertex, mode: "passthrough" },
    };
  }
}
