/**
 * A proxy on one cluster member serves only the instances that member runs. Each member has
 * its own bridge and its own proxy; a caller is identified by its source address on that
 * bridge, and with per-member `bridge` networks two members may hand out the same address.
 * So the proxy started with `--target MEMBER` sees a listing filtered to instances whose
 * `location` is that member (the `?target=` filter of incusd too), and an instance elsewhere
 * can never be mistaken for a local caller with the same address.
 *
 * @module
 */

import type { IncusLike } from "./clients.ts";

/** `client` with its instance listings narrowed to those located on `member`. */
export function memberOnly(client: IncusLike, member: string): IncusLike {
  return {
    async call(method, path, opts) {
      const listing = method === "GET" && path === "/1.0/instances";
      const r = await client.call(method, path, listing ? { ...opts, target: member } : opts);
      if (!listing || r.kind !== "sync" || !Array.isArray(r.metadata)) return r;
      const here = (r.metadata as { location?: unknown }[]).filter((i) => i.location === member);
      return { ...r, metadata: here };
    },
    events: (opts) => client.events(opts),
  };
}
