/**
 * The one retry of an Incus 6.0 race on bridges, shared by the sandbox engine's egress
 * networks and the MCP layer's proxy-only bridge; kept out of the engine so that the latter
 * does not load it (issue 11: start-up).
 *
 * @module
 */

import { hasCode } from "./errors.ts";
import type { Clock } from "./clock.ts";

/**
 * Incus 6.0 sets a bridge up by listing every link and then asking for each one's details;
 * a veth that vanishes in between (any container stopping meanwhile) fails the whole
 * network create/update ("Failed to delete bridge children interfaces: … does not exist").
 * Such a call is tried once more after a second.
 */
export async function retryLinkRace<T>(clock: Clock, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (!hasCode(e, "api") || !/bridge children interfaces.*does not exist/s.test(e.message)) {
      throw e;
    }
    await clock.sleep(1000);
    return await f();
  }
}
