/**
 * Who is calling and what they may get: the source address on the bridge → the Incus instance
 * (`clients.ts`, following Incus events with `follow.ts`; `member.ts` on a cluster member), who
 * owns an address and with which grant (`_identity.ts`, pure), the bridge guard's nftables
 * rules against forged addresses (`guard.ts`) and the kernel's per-address connection limit
 * (`conn_limit.ts`), callers of connections the proxy hands to itself (`handoff.ts`), the
 * per-instance cap and timeouts (`limits.ts`), and the decision on one intercepted request
 * (`admit.ts`), shared by the relay and the `Deno.serve` handler.
 *
 * @module
 */

export type { EgressLookup } from "./admit.ts";
export {
  type Caller,
  type CallerLookup,
  ClientRegistry,
  type IncusLike,
  incusSource,
  type InstanceInfo,
  type InstanceSource,
} from "./clients.ts";
export type { BridgePort, GuardEntry } from "./guard.ts";
export { DEFAULT_LIMITS, type ProxyLimits } from "./limits.ts";
