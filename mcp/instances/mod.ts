/**
 * Instances: copy-on-write branches of built templates, their network modes, the
 * per-start instance secret, start/stop/destroy, the `isx list` records and the
 * `isx shell` exec, the preflight that refuses instances the proxy cannot serve, and the
 * repair of a guest's trust store when the proxy's CA changed. Everything goes through
 * the Incus client of `rpc/mod.ts`.
 *
 * @module
 */

export * from "./accounts.ts";
export * from "./branch.ts";
export * from "./ca_trust.ts";
export * from "./lifecycle.ts";
export * from "./list.ts";
export * from "./network.ts";
export * from "./preflight.ts";
export * from "./secret.ts";
export * from "./shell.ts";
export * from "./caller_grant.ts";
export * from "./mcp_client_reg.ts";
export type { AddressListing } from "./static_ip.ts";
