/**
 * The per-host proxy: credentials injected on the host, each instance's model calls and
 * traffic counted (shared/spec/isx-mcp.md §7).
 *
 * No credential ever enters an instance. Guests resolve the intercepted domains to the
 * bridge gateway (the bridge's dnsmasq) and reach {@link startProxy}'s TLS server on port
 * 443, which presents a leaf for the requested name signed by the host CA that templates
 * install; the proxy swaps
 * the guests' placeholders for real values on the way upstream and scrubs real values from
 * everything coming back. Anything else a guest sends through `HTTP(S)_PROXY` (port 3128)
 * is tunnelled and counted. The ops port (18080) answers `/health` and `/activity` to host
 * callers only.
 *
 * Layering: pure decisions in `policy.ts`, `rewrite.ts`, `counter.ts`, `usage.ts`,
 * `activity.ts`, `http1.ts` and `chunked.ts` (HTTP/1.1 heads and framing), `scrub.ts`
 * (in-place masking), `leaf_cache.ts` (a leaf per server name), `decode.ts` (bodies compressed
 * anyway), `egress_guard.ts` (public addresses only for egress); I/O in `relay.ts` (the
 * intercepting HTTP/1.1 relay, the hot path) with `relay_body.ts`, `relay_decode.ts`,
 * `conn_reader.ts` and `upstream_pool.ts`, `intercept.ts` (its TLS listeners), `sni.ts`
 * (Deno's unofficial per-SNI certificate hook), `admit.ts` (the decision per request), `server.ts` (the `Deno.serve` handler
 * for upgrades and HTTP/1.0), `forward.ts`, `health.ts`, `dns.ts`, `clients.ts` (address →
 * instance through the Incus client), `ca.ts` (the only TLS-library code),
 * `credentials.ts` (the 0600 file), `egress.ts` (isb egress secrets), `proxy_only.ts` (serving
 * isx's proxy-only bridge too, once it exists) and `host.ts`
 * (assembling all of it from the user's files for `isx proxy`).
 *
 * @module
 */

export { type CaInfo, CaSigner, ensureCa, loadCa } from "./ca.ts";
export * from "./activity.ts";
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
export type { HeaderOp } from "./rewrite.ts";
export type { EgressLookup } from "./admit.ts";
export type { CallEnd, CallerRef, ModelCall, TrafficCall } from "./counter.ts";
export type { Usage } from "./usage.ts";
export {
  type Caller,
  type CallerLookup,
  ClientRegistry,
  type IncusLike,
  incusSource,
  type InstanceInfo,
  type InstanceSource,
} from "./clients.ts";
export type { Grant, GrantName } from "./policy.ts";
export type { GuardEntry } from "./guard.ts";
export type { HealthInfo, HealthStatus } from "./health.ts";
export { ActivityCounter } from "./counter.ts";
export {
  type ExtraListen,
  type ProxyHandle,
  type ProxyListen,
  startProxy,
  type StartProxyOptions,
} from "./start.ts";
export {
  BridgeFollower,
  type FollowerDeps,
  KEY_ISX_ROLE,
  proxyOnlyGateway,
  ROLE_PROXY_ONLY,
} from "./proxy_only.ts";
export * from "./host.ts";
export * from "./host_config.ts";
export * from "./runfiles.ts";
export { applyDns, dnsBlockCurrent, dnsBlockGateway, gatewayOf, mergeDnsBlock } from "./dns.ts";
export { type CredentialNamespace, missingNamespaces, NAMESPACES } from "./credentials.ts";
export * from "./activity_format.ts";
export {
  type BridgeInfo,
  bridgeInfoOf,
  EgressListeners,
  type EgressServeDeps,
} from "./egress_serve.ts";
export { type EgressEntry, EgressSecrets, parseEgressFile } from "./egress.ts";
export type { Cidr, Resolver } from "./egress_guard.ts";
export type { HostNets } from "./egress_dial.ts";
export { DEFAULT_LIMITS, type ProxyLimits } from "./limits.ts";
