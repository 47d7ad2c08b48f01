/**
 * Networks and network ACLs: list, get (with ETag), create, replace (PUT), patch, delete.
 * Sandboxes use ACLs to fence guest egress and managed bridges for isolated networks.
 *
 * @module
 */

import { type IncusConn, seg } from "./conn.ts";
import { ifMatch, type MutationOptions, waitIfAsync } from "./_mutate.ts";
import type { AclRule, Network, NetworkAcl, Versioned } from "./types.ts";

/** The writable part of a network. */
export interface NetworkPut {
  /** Configuration keys. */
  config: Record<string, string>;
  /** Free-form description. */
  description?: string;
}

/** `POST /1.0/networks` body. */
export interface NetworksPost extends Partial<NetworkPut> {
  /** Name. */
  name: string;
  /** `bridge` (default), `macvlan`, `ovn`… */
  type?: string;
}

/** The writable part of a network ACL. */
export interface NetworkAclPut {
  /** Free-form description. */
  description?: string;
  /** Ingress rules. */
  ingress: AclRule[];
  /** Egress rules. */
  egress: AclRule[];
  /** Configuration keys. */
  config?: Record<string, string>;
}

/** `POST /1.0/network-acls` body. */
export interface NetworkAclsPost extends Partial<NetworkAclPut> {
  /** Name. */
  name: string;
}

/** Options of a guarded update. */
export type UpdateOptions = MutationOptions & { etag?: string | undefined };

const net = (name: string) => `/1.0/networks/${seg(name)}`;
const acl = (name: string) => `/1.0/network-acls/${seg(name)}`;

/** Lists networks. */
export async function listNetworks(conn: IncusConn): Promise<Network[]> {
  return (await conn.sync<Network[]>("GET", "/1.0/networks", { query: { recursion: 1 } }))
    .metadata ?? [];
}

/** Fetches one network and its ETag. */
export async function getNetwork(conn: IncusConn, name: string): Promise<Versioned<Network>> {
  const r = await conn.sync<Network>("GET", net(name));
  return { value: r.metadata, etag: r.etag };
}

/** Creates a network (on `target` in a cluster). */
export async function createNetwork(
  conn: IncusConn,
  req: NetworksPost,
  opts: MutationOptions & { target?: string },
): Promise<void> {
  const call = { body: { type: "bridge", config: {}, ...req } };
  const r = await conn.call(
    "POST",
    "/1.0/networks",
    opts.target ? { ...call, target: opts.target } : call,
  );
  await waitIfAsync(conn, r, opts);
}

/** Replaces a network's config (If-Match with `etag`). */
export async function putNetwork(
  conn: IncusConn,
  name: string,
  put: NetworkPut,
  opts: UpdateOptions,
): Promise<void> {
  const r = await conn.call("PUT", net(name), { body: put, headers: ifMatch(opts.etag) });
  await waitIfAsync(conn, r, opts);
}

/** Merges keys into a network's config. */
export async function patchNetwork(
  conn: IncusConn,
  name: string,
  patch: Partial<NetworkPut>,
  opts: UpdateOptions,
): Promise<void> {
  const r = await conn.call("PATCH", net(name), { body: patch, headers: ifMatch(opts.etag) });
  await waitIfAsync(conn, r, opts);
}

/** Deletes a network. */
export async function deleteNetwork(
  conn: IncusConn,
  name: string,
  opts: MutationOptions,
): Promise<void> {
  await waitIfAsync(conn, await conn.call("DELETE", net(name)), opts);
}

/** Lists network ACLs. */
export async function listNetworkAcls(conn: IncusConn): Promise<NetworkAcl[]> {
  return (await conn.sync<NetworkAcl[]>("GET", "/1.0/network-acls", { query: { recursion: 1 } }))
    .metadata ?? [];
}

/** Fetches one network ACL and its ETag. */
export async function getNetworkAcl(
  conn: IncusConn,
  name: string,
): Promise<Versioned<NetworkAcl>> {
  const r = await conn.sync<NetworkAcl>("GET", acl(name));
  return { value: r.metadata, etag: r.etag };
}

/** Creates a network ACL. */
export async function createNetworkAcl(
  conn: IncusConn,
  req: NetworkAclsPost,
  opts: MutationOptions,
): Promise<void> {
  const body = { ingress: [], egress: [], config: {}, ...req };
  await waitIfAsync(conn, await conn.call("POST", "/1.0/network-acls", { body }), opts);
}

/** Replaces a network ACL (If-Match with `etag`). */
export async function putNetworkAcl(
  conn: IncusConn,
  name: string,
  put: NetworkAclPut,
  opts: UpdateOptions,
): Promise<void> {
  const r = await conn.call("PUT", acl(name), { body: put, headers: ifMatch(opts.etag) });
  await waitIfAsync(conn, r, opts);
}

/** Merges fields into a network ACL. */
export async function patchNetworkAcl(
  conn: IncusConn,
  name: string,
  patch: Partial<NetworkAclPut>,
  opts: UpdateOptions,
): Promise<void> {
  const r = await conn.call("PATCH", acl(name), { body: patch, headers: ifMatch(opts.etag) });
  await waitIfAsync(conn, r, opts);
}

/** Deletes a network ACL. */
export async function deleteNetworkAcl(
  conn: IncusConn,
  name: string,
  opts: MutationOptions,
): Promise<void> {
  await waitIfAsync(conn, await conn.call("DELETE", acl(name)), opts);
}
