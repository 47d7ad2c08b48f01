/**
 * What the proxy is told and decides from it: the credentials file (`credentials.ts`, its shape
 * in `_credentials_shape.ts`, mode 0600, every value a {@link Secret} at once, `secret.ts`: it
 * prints as its length only), the `proxy:` block of config.yaml (`host_config.ts`), both read
 * with js-yaml (pre-built, through rpc/yaml.ts) and checked without zod (`shape.ts`: the proxy
 * runs for days, and zod would stay resident), and the pure
 * policy built from them: which hosts are intercepted and which credential goes where
 * (`policy.ts`, with `_hosts.ts` and `_grants.ts`), which account a caller uses
 * (`accounts.ts`), header rules for other domains (`_rules.ts`), Vertex AI hosts, request
 * translation and tokens (`vertex.ts`, `vertex_token.ts`), credentials printed by a command
 * (`command_source.ts`: no shell, bounded, cached for a ttl, single flight, rate-bounded),
 * the live reload of the files (`reload.ts`), what `isx proxy dump` shows (`dump.ts`) and
 * whether a part only a restart applies changed since start (`drift.ts`).
 *
 * @module
 */

export {
  DEFAULT_HOSTS,
  type Namespace,
  Policy,
  type PolicyConfig,
  type Route,
  type VertexRoute,
} from "./policy.ts";
export {
  ACCOUNT_KEYS,
  ACCOUNT_NAME_RE,
  type AccountCatalogue,
  type AccountChoices,
  canonicalKey,
  catalogueAccounts,
  type CatalogueEntry,
  NAMESPACE_KEYS,
  parseAccountPairs,
  resolveAccount,
  type Resolved,
} from "./accounts.ts";
export { translateMessages, type Translation, vertexHost } from "./vertex.ts";
export { type RunCommand, VertexTokens } from "./vertex_token.ts";
export {
  type CommandRef,
  CommandSources,
  DEFAULT_COMMAND_TTL_MS,
  isCommand,
  type SourceStatus,
  type Value,
} from "./command_source.ts";
export { LiveReload, RELOAD_POLL_MS, type ReloadState, watchCredentials } from "./reload.ts";
export {
  type Accounts,
  type AnthropicAccount,
  type ClaudeAuthMode,
  type Credentials,
  type CustomRule,
  loadCredentials,
  parseCredentials,
  type TokenAccount,
  type VertexConfig,
} from "./credentials.ts";
export { Secret } from "./secret.ts";
export type { Grant, GrantName } from "./policy.ts";
export * from "./host_config.ts";
export { type CredentialNamespace, missingNamespaces, NAMESPACES } from "./credentials.ts";
