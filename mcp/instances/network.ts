/**
 * Network modes of instances, as the devices of the copy request:
 * - `full`: the profile's NIC, unchanged.
 * - `proxy-only`: the NIC with the network ACL `isx-proxy-only-<bridge>`, which lets the
 *   guest reach only the proxy's ports and DNS on the bridge gateway (Incus always lets
 *   DHCP through); everything else is rejected.
 * - `airgap`: no network device at all (`eth0` replaced by a `none` device).
 *
 * @module
 */

import {
  type AclRule,
  type Device,
  type IncusClient,
  IsbError,
  isNotFound,
} from "../../rpc/mod.ts";

/** An instance's network mode. */
export type NetworkMode = "full" | "proxy-only" | "airgap";

/** The ports of the proxy on the gateway (TLS interception, forward proxy, health). */
export const PROXY_PORTS = "443,3128,18080";

/** The ACL name for a bridge. */
export function aclName(bridge: string): string {
  return `isx-proxy-only-${bridge}`;
}

/** The bridge's gateway address (its `ipv4.address` without the prefix). */
export async function bridgeGateway(client: IncusClient, bridge: string): Promise<string> {
  let addr: string | undefined;
  try {
    addr = (await client.getNetwork(bridge)).value.config["ipv4.address"];
  } catch (e) {
    if (isNotFound(e)) {
      throw new IsbError("not_found", `read the gateway of bridge "${bridge}": no such network`);
    }
    throw e;
  }
  const ip = addr?.split("/")[0];
  if (!ip || ip === "none" || ip === "auto") {
    throw new IsbError(
      "invalid",
      `read the gateway of bridge "${bridge}": ipv4.address is "${addr ?? ""}"`,
    );
  }
  return ip;
}

/** Where the proxy is: the bridge, and optionally its gateway and ports. */
export interface ProxyPlace {
  /** The bridge name. */
  bridge: string;
  /** Default: the bridge's ipv4.address. */
  gateway?: string;
  /** The proxy's ports (default 443, 3128, 18080). */
  ports?: readonly number[];
}

/** The ACL's egress rules for a gateway. */
export function aclRules(gateway: string, ports: string = PROXY_PORTS): AclRule[] {
  const to = (protocol: string, ports: string, description: string): AclRule => ({
    action: "allow",
    state: "enabled",
    protocol,
    destination: `${gateway}/32`,
    destination_port: ports,
    description,
  });
  return [
    to("tcp", ports, "the isx proxy"),
    to("udp", "53", "DNS on the bridge"),
    to("tcp", "53", "DNS on the bridge"),
  ];
}

/** Creates or refreshes the proxy-only ACL of a bridge; returns its name. */
export async function ensureProxyOnlyAcl(client: IncusClient, place: ProxyPlace): Promise<string> {
  const bridge = place.bridge;
  const name = aclName(bridge);
  const gateway = place.gateway ?? await bridgeGateway(client, bridge);
  const egress = aclRules(gateway, place.ports?.length ? place.ports.join(",") : PROXY_PORTS);
  try {
    const { value, etag } = await client.getNetworkAcl(name);
    if (JSON.stringify(value.egress.map(pick)) !== JSON.stringify(egress.map(pick))) {
      await client.putNetworkAcl(name, {
        description: value.description,
        egress,
        ingress: value.ingress,
        config: value.config,
      }, { step: `update network ACL ${name}`, etag });
    }
  } catch (e) {
    if (!isNotFound(e)) throw e;
    try {
      await client.createNetworkAcl({
        name,
        description: `isx: proxy-only instances on ${bridge} reach only the proxy and DNS`,
        egress,
        ingress: [],
      }, { step: `create network ACL ${name}` });
    } catch (e2) {
      if (!(e2 instanceof IsbError && e2.code === "already_exists")) throw e2; // a racing creator
    }
  }
  return name;
}

function pick(r: AclRule): string {
  return [r.action, r.protocol, r.destination, r.destination_port].join(" ");
}

/** The device overrides of a copy request for a network mode. */
export async function networkDevices(
  client: IncusClient,
  mode: NetworkMode,
  place: ProxyPlace,
): Promise<Record<string, Device>> {
  if (mode === "full") return {};
  if (mode === "airgap") return { eth0: { type: "none" } };
  const acl = await ensureProxyOnlyAcl(client, place);
  return {
    eth0: {
      type: "nic",
      name: "eth0",
      network: place.bridge,
      "security.acls": acl,
      "security.acls.default.egress.action": "reject",
      "security.acls.default.ingress.action": "allow",
    },
  };
}
