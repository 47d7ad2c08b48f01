/**
 * Which account of a provider namespace a caller's requests use (shared/spec/isx-mcp.md
 * §7.G): the instance's pin (`user.incus-spawn.account.<ns>`, set by `isx branch --account`
 * or `isx proxy account set`), else its template's `accounts:` (stamped on the template at
 * build as `template-account.<ns>` and carried to every copy), else the namespace's
 * `default:` in credentials.yaml, else by priority (Anthropic: Vertex > OAuth > API key),
 * else the first account.
 *
 * Fail closed: a pin or template account naming an account that does not exist is an
 * error, never a fallback; so is a pin to an Anthropic account of another auth mode than
 * the instance was built for (the mode of the account its template or the default gives
 * it), since the instance's Claude Code was set up for that mode.
 *
 * Pure.
 *
 * @module
 */

import type { Accounts, AnthropicAccount, ClaudeAuthMode } from "./credentials.ts";

/** A provider namespace with built-in injection rules. */
export type Namespace = "anthropic" | "openai" | "github";

/** Names accepted for each namespace in pins and `accounts:` (the original says `claude`). */
export const NAMESPACE_KEYS: Readonly<Record<Namespace, readonly string[]>> = {
  anthropic: ["anthropic", "claude"],
  openai: ["openai", "codex"],
  github: ["github"],
};

/** Every accepted namespace key, for validating pins and template `accounts:`. */
export const ACCOUNT_KEYS: readonly string[] = Object.values(NAMESPACE_KEYS).flat();

/** An account name as pins and definitions may write it. */
export const ACCOUNT_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Anthropic's default order when credentials.yaml names no default. */
const PRIORITY: readonly ClaudeAuthMode[] = ["vertex", "oauth", "api_key"];

/** A caller's account choices: its own pins and its template's `accounts:`. */
export interface AccountChoices {
  /** Instance pins by namespace key. */
  pins?: Readonly<Record<string, string>> | undefined;
  /** The template's `accounts:` by namespace key. */
  template?: Readonly<Record<string, string>> | undefined;
}

/** The outcome: an account (or none configured), or why the request must fail. */
export type Resolved<A> =
  | { account: A; name: string; source: "pin" | "template" | "default"; error?: undefined }
  | { account?: undefined; error?: undefined }
  | { account?: undefined; error: string };

function keyed(ns: Namespace, map: Readonly<Record<string, string>> | undefined) {
  const key = NAMESPACE_KEYS[ns].find((k) => map?.[k] !== undefined && map[k] !== "");
  return key === undefined ? undefined : map![key]!;
}

/** The namespace default: `default:`, else by priority (Anthropic), else the first. */
export function defaultAccount<A>(
  ns: Namespace,
  accounts: Accounts<A>,
): { name: string; account: A } | undefined {
  if (accounts.default !== undefined) {
    const a = accounts.accounts.get(accounts.default);
    return a === undefined ? undefined : { name: accounts.default, account: a };
  }
  const entries = [...accounts.accounts];
  if (ns === "anthropic") {
    for (const kind of PRIORITY) {
      const hit = entries.find(([, a]) => (a as AnthropicAccount).kind === kind);
      if (hit) return { name: hit[0], account: hit[1] };
    }
  }
  const first = entries[0];
  return first ? { name: first[0], account: first[1] } : undefined;
}

/** Resolves one namespace's account for a caller (pin > template > default). */
export function resolveAccount<A>(
  ns: Namespace,
  accounts: Accounts<A>,
  choices: AccountChoices,
): Resolved<A> {
  const tplName = keyed(ns, choices.template);
  const tpl = tplName === undefined ? undefined : accounts.accounts.get(tplName);
  if (tplName !== undefined && tpl === undefined) {
    return {
      error:
        `the template's account "${tplName}" for ${ns} is not in credentials.yaml: add it, or change the template's accounts:`,
    };
  }
  const base = tpl !== undefined
    ? { name: tplName!, account: tpl, source: "template" as const }
    : (() => {
      const d = defaultAccount(ns, accounts);
      return d ? { ...d, source: "default" as const } : undefined;
    })();
  const pinName = keyed(ns, choices.pins);
  if (pinName === undefined) return base ?? {};
  const pinned = accounts.accounts.get(pinName);
  if (pinned === undefined) {
    return {
      error:
        `account "${pinName}" for ${ns} is not in credentials.yaml: add it, or change the pin with isx proxy account set`,
    };
  }
  if (ns === "anthropic" && base) {
    const want = (base.account as AnthropicAccount).kind;
    const got = (pinned as AnthropicAccount).kind;
    if (want !== got) {
      return {
        error:
          `account "${pinName}" for ${ns} uses ${got} but this instance was built for ${want}: pin a ${want} account, or branch a new instance`,
      };
    }
  }
  return { account: pinned, name: pinName, source: "pin" };
}

/** Parses `ns=name` pairs (from `--account`); throws a TypeError naming the bad one. */
export function parseAccountPairs(pairs: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pairs) {
    const eq = p.indexOf("=");
    const key = eq < 0 ? p : p.slice(0, eq);
    const name = eq < 0 ? "" : p.slice(eq + 1);
    if (!ACCOUNT_KEYS.includes(key)) {
      throw new TypeError(
        `account "${p}": the namespace must be one of ${ACCOUNT_KEYS.join(", ")}`,
      );
    }
    if (!ACCOUNT_NAME_RE.test(name)) {
      throw new TypeError(
        `account "${p}": write namespace=name, the name of letters, digits, '.', '_' or '-'`,
      );
    }
    out[canonicalKey(key)] = name;
  }
  return out;
}

/** The namespace key stamps use for an accepted key (`anthropic` → `claude`). */
export function canonicalKey(key: string): string {
  if (NAMESPACE_KEYS.anthropic.includes(key)) return "claude";
  if (NAMESPACE_KEYS.openai.includes(key)) return "openai";
  return key;
}

/** One namespace's accounts as the ops port lists them: names and modes, never values. */
export interface CatalogueEntry {
  /** `default:` of credentials.yaml, if set. */
  default: string | null;
  /** Accounts in file order with their kind (`api_key`, `oauth`, `vertex`, `token`). */
  accounts: { name: string; kind: string }[];
}

/** The account catalogue by namespace (what `GET /accounts` answers). */
export type AccountCatalogue = Record<Namespace, CatalogueEntry>;

/** The catalogue of credentials' accounts: names, kinds and defaults only. */
export function accountCatalogue(
  creds: Readonly<Record<Namespace, Accounts<{ kind: string }>>>,
): AccountCatalogue {
  const entry = (a: Accounts<{ kind: string }>): CatalogueEntry => ({
    default: a.default ?? null,
    accounts: [...a.accounts].map(([name, acc]) => ({ name, kind: acc.kind })),
  });
  return {
    anthropic: entry(creds.anthropic),
    openai: entry(creds.openai),
    github: entry(creds.github),
  };
}

/** The catalogue back as {@link Accounts} (kinds only), for resolving without the values. */
export function catalogueAccounts(e: CatalogueEntry): Accounts<{ kind: string }> {
  return {
    default: e.default ?? undefined,
    accounts: new Map(e.accounts.map((a) => [a.name, { kind: a.kind }])),
  };
}
