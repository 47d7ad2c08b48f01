/**
 * The proxy as a process on a host: {@link startProxy} binds the listeners around one counter
 * (`_start.ts`, with the accept loop every listener shares in `accept.ts`), `_host.ts`
 * assembles everything from the user's files for `isx proxy`, the ops port (`_health.ts`:
 * `/health`, `/activity`, `/accounts`, `/ca.crt`), the bridge's DNS (`dns.ts`), isx's
 * proxy-only bridge once it exists (`_proxy_only.ts`, served through the listeners a running
 * proxy adds and removes, `_extra_listens.ts`), the run files and the lock a proxy holds until
 * its cleanup is done (`_runfiles.ts`), and the retries of what it needs from Incus and the
 * kernel until each holds (`_converge.ts`).
 *
 * @module
 */

export type { CredentialsHealth, HealthInfo, HealthStatus } from "./_health.ts";
export type { PendingNeed } from "./_converge.ts";
export {
  type ExtraListen,
  type ProxyHandle,
  type ProxyListen,
  startProxy,
  type StartProxyOptions,
} from "./_start.ts";
export {
  BridgeFollower,
  type FollowerDeps,
  KEY_ISX_ROLE,
  proxyOnlyGateway,
  ROLE_PROXY_ONLY,
} from "./_proxy_only.ts";
export * from "./_host.ts";
export * from "./_runfiles.ts";
export { applyDns, dnsBlockCurrent, dnsBlockGateway, gatewayOf, mergeDnsBlock } from "./dns.ts";
