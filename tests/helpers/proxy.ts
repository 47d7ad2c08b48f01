/**
 * What the in-process test proxies share: they listen on loopback, each port picked by the
 * kernel, so tests run side by side without a fixed port.
 *
 * @module
 */

import type { ProxyListen } from "../../proxy/mod.ts";

/** Loopback listeners on free ports; `health: false` leaves out the ops port. */
export function loopbackListen(opts: { health?: boolean } = {}): ProxyListen {
  const free = () => ({ hostname: "127.0.0.1", port: 0 });
  return { tls: free(), forward: free(), health: opts.health === false ? [] : [free()] };
}
