/**
 * The host side shared by templates and instances: config.yaml's host keys, `isx init`,
 * instance stamps, small helpers for talking to guests through the Incus client (the address
 * wait and the lease watch that times it), and what the proxy's ops port says
 * (`proxy_check.ts`).
 *
 * @module
 */

export * from "./config.ts";
export * from "./init.ts";
export * from "./stamps.ts";
export * from "./guest.ts";
export * from "./waits.ts";
export * from "./leases.ts";
export * from "./proxy_check.ts";
