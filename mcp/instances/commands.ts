/**
 * What the CLI's instance commands (`isx branch|start|stop|destroy`, cli/instances.ts) and
 * their checks (cli/instance_checks.ts) use, and nothing else: the branch and lifecycle
 * flows, the coordinator grant, the preflight and CA repair, the stamps and the proxy
 * check, and the warm pool's claim. The barrels (`mcp/instances/mod.ts`, `mcp/pool/mod.ts`,
 * `mcp/host/mod.ts`) also bring `isx shell`'s exec, the listing, the pool keeper and through
 * them the task and session layers: 176 modules at the start of `isx branch` instead of 71
 * (issue 24: start-up is paid per command). Nothing here imports zod: the definition loader
 * is imported by the command once its first requests are sent.
 *
 * @module
 */

export { branchDefaults, branchInstance, type BranchResult, type Limits } from "./branch.ts";
export { destroyIsxInstance, startIsxInstance, stopIsxInstance } from "./lifecycle.ts";
export { MCP_CALLER_STAMP, newGrant, stampGrant } from "./caller_grant.ts";
export { reconcileMcpClients } from "./mcp_client_reg.ts";
export type { NetworkMode, ProxyPlace } from "./network.ts";
export { credentialNeeds, judgePreflight, preflight } from "./preflight.ts";
export { needsCaRepair, repairGuestCa } from "./ca_trust.ts";
export { type AddressListing, beginAddressListing, listAddresses } from "./static_ip.ts";
export { readStamps, STAMP } from "../host/stamps.ts";
export {
  type HealthRead,
  type OwnBuild,
  pemFingerprint,
  type ProxyHealth,
  readProxyHealth,
  readServedCa,
} from "../host/proxy_check.ts";
export { proxyHealthUrl, readHostConfig } from "../host/config.ts";
export { NAME_RE } from "../templates/names.ts";
export { claimMember } from "../pool/claim.ts";
export { placeFingerprint } from "../pool/members.ts";
