/**
 * isb egress (isb-rpc.md §13): the per-sandbox secrets `isb rpc` writes and the lookup over
 * them (`secrets.ts`), the TLS servers on each egress bridge (`serve.ts`), the one parse of a
 * host a guest names into bytes (`address.ts`, pure; the forward proxy's too), the guard that
 * lets a host name lead only to a public address (`guard.ts`, pure), and the connecting
 * through it, to the checked bytes (`dial.ts`, `connect.ts`).
 *
 * @module
 */

export { type BridgeInfo, bridgeInfoOf, EgressListeners, type EgressServeDeps } from "./serve.ts";
export { type EgressEntry, EgressSecrets, parseEgressFile } from "./secrets.ts";
export type { Cidr, Resolver } from "./guard.ts";
export type { HostNets } from "./dial.ts";
