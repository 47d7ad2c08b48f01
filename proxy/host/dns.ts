/**
 * The bridge's DNS: intercepted domains resolve to the gateway through the bridge's
 * dnsmasq (`raw.dnsmasq` lines `address=/<domain>/<gateway>`), set by the proxy at start.
 *
 * The proxy's lines live in one marked block; everything else in `raw.dnsmasq` is kept as
 * it is, and a changed domain set replaces the block. The update is a read-modify-write
 * guarded by the network's ETag and retried on a conflict. {@link mergeDnsBlock} is pure.
 *
 * @module
 */

import { type IncusClient, isPreconditionFailed } from "../../rpc/base.ts";

/** The default block tag; tests use their own so they never touch a running proxy's block. */
export const DNS_TAG = "isx-proxy";

/** `raw.dnsmasq` with the block named `tag` replaced (or removed when `names` is empty). */
export function mergeDnsBlock(
  existing: string,
  opts: { names: readonly string[]; gateway: string; tag?: string | undefined },
): string {
  const { names, gateway } = opts;
  const tag = opts.tag ?? DNS_TAG;
  const BEGIN = `# ${tag} begin (managed by isx proxy; edits are replaced)`;
  const END = `# ${tag} end`;
  const lines = existing.split("\n");
  const kept: string[] = [];
  let inside = false;
  for (const l of lines) {
    if (l === BEGIN) inside = true;
    else if (l === END) inside = false;
    else if (!inside) kept.push(l);
  }
  while (kept.length && kept[kept.length - 1]!.trim() === "") kept.pop();
  if (names.length === 0) return kept.join("\n");
  const block = [BEGIN, ...names.map((n) => `address=/${n}/${gateway}`), END];
  return [...kept, ...block].join("\n");
}

/** The gateway the proxy's block in `raw.dnsmasq` sends names to, or `undefined` (pure). */
export function dnsBlockGateway(existing: string, tag: string = DNS_TAG): string | undefined {
  const begin = `# ${tag} begin`;
  let inside = false;
  for (const l of existing.split("\n")) {
    if (l.startsWith(begin)) inside = true;
    else if (l === `# ${tag} end`) inside = false;
    else if (inside) {
      const m = /^address=\/[^/]+\/(.+)$/.exec(l);
      if (m) return m[1];
    }
  }
  return undefined;
}

/** Whether `raw.dnsmasq` already holds exactly this block (pure). */
export function dnsBlockCurrent(
  existing: string,
  opts: { names: readonly string[]; gateway: string; tag?: string | undefined },
): boolean {
  return mergeDnsBlock(existing, opts).trimEnd() === existing.trimEnd();
}

/** The gateway address of a bridge config (`ipv4.address` without the prefix). */
export function gatewayOf(config: Readonly<Record<string, string>>): string | undefined {
  const a = config["ipv4.address"];
  if (!a || a === "none" || a === "auto") return undefined;
  return a.split("/")[0];
}

/** Reads the bridge's gateway address. */
export async function bridgeGateway(
  client: IncusClient,
  bridge: string,
): Promise<string | undefined> {
  const net = await client.getNetwork(bridge);
  return gatewayOf(net.value.config);
}

/** Writes the proxy's block into the bridge's `raw.dnsmasq`; true when it changed. */
export async function applyDns(
  client: IncusClient,
  bridge: string,
  opts: { names: readonly string[]; gateway: string; tag?: string },
): Promise<boolean> {
  for (let attempt = 0;; attempt++) {
    const net = await client.getNetwork(bridge);
    const before = net.value.config["raw.dnsmasq"] ?? "";
    const after = mergeDnsBlock(before, opts);
    if (after === before) return false;
    try {
      await client.patchNetwork(bridge, { config: { "raw.dnsmasq": after } }, {
        step: `set DNS of ${bridge} for the proxy`,
        etag: net.etag,
      });
      return true;
    } catch (e) {
      if (!isPreconditionFailed(e) || attempt >= 4) throw e;
    }
  }
}
