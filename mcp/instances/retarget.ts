/**
 * Proxy settings of a branch that lives on another bridge than its template was built on.
 * A template bakes `HTTP(S)_PROXY=http://<gateway>:<port>` of the default bridge into
 * `/etc/profile.d/isx.sh` and `/etc/environment`; a proxy-only branch sits on the proxy-only
 * bridge, whose gateway differs, so before its first start those lines are rewritten to name
 * that gateway (port, CA, placeholders and everything else stay). {@link retargetProxyText}
 * is the pure part.
 *
 * @module
 */

import { type IncusClient, IsbError, isNotFound } from "../../rpc/base.ts";

/** The guest files that carry the proxy address. */
export const PROXY_ENV_FILES = ["/etc/profile.d/isx.sh", "/etc/environment"] as const;

const PROXY_LINE =
  /^(\s*(?:export\s+)?(?:HTTPS_PROXY|HTTP_PROXY|https_proxy|http_proxy)=['"]?http:\/\/)[^:/'"\s]+(:\d+)/;

/** `text` with every proxy variable's host replaced by `gateway` (other lines untouched). */
export function retargetProxyText(text: string, gateway: string): string {
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(gateway)) {
    throw new RangeError(`retarget proxy settings: "${gateway}" is not an IPv4 address`);
  }
  return text.split("\n").map((l) => l.replace(PROXY_LINE, `$1${gateway}$2`)).join("\n");
}

/** Rewrites the proxy settings of (stopped) instance `name` to name `gateway`. */
export async function retargetGuestProxy(
  client: IncusClient,
  name: string,
  gateway: string,
): Promise<void> {
  await Promise.all(PROXY_ENV_FILES.map(async (path) => {
    let file;
    try {
      file = await client.pullFile(name, path);
    } catch (e) {
      if (isNotFound(e)) return; // not an isx-built guest file: nothing to retarget
      throw e;
    }
    const before = new TextDecoder().decode(file.data);
    const after = retargetProxyText(before, gateway);
    if (after === before) return;
    try {
      await client.pushFile(name, path, after, {
        step: `point ${path} of ${name} at the proxy on ${gateway}`,
        uid: file.uid,
        gid: file.gid,
        mode: file.mode,
      });
    } catch (e) {
      if (e instanceof IsbError) throw e;
      throw new IsbError("io", `retarget ${path} of "${name}": ${(e as Error).message}`, {
        cause: e,
      });
    }
  }));
}
