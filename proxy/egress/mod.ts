/**
 * isb egress (isb-rpc.md §13): the per-sandbox secrets `isb rpc` writes and the lookup over
 * them (`secrets.ts`), the TLS servers on each egress bridge (`serve.ts`), the guard that lets
 * a host name lead only to a public address (`guard.ts`, pure), and the connecting through it
 * (`dial.ts`, `connect.ts`).
 *
 * @module
 */

export { type BridgeInfo, bridgeInfoOf, EgressListeners, type EgressServeDeps } from "./serve.ts";
export { type EgressEntry, EgressSecrets, parseEgressFile } from "./secrets.ts";
export type { Cidr, Resolver } from "./guard.ts";
export type { HostNets } from "./dial.ts";
