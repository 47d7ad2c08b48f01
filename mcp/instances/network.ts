/**
 * Network modes of instances, as the devices of the copy request:
 * - `full`: the profile's NIC, unchanged.
 * - `proxy-only`: a NIC on isx's own proxy-only bridge (`isxproxy0` unless `config.yaml`
 *   says otherwise; {@link ensureProxyOnlyBridge}), which neither NATs nor routes and
 *   carries a bridge-level ACL: from the guest only TCP to the gateway's proxy ports and DNS
 *   to the gateway pass (Incus lets DHCP through), everything else is rejected.
 * - `airgap`: no network device at all (`eth0` replaced by a `none` device).
 *
 * Why a bridge of its own, with the ACL bound on the bridge and not on the NIC: a per-NIC
 * ACL on a bridged NIC makes Incus load bridge-family nftables rules with `ct state`, which
 * kernels without bridge conntrack (`CONFIG_NF_CONNTRACK_BRIDGE`) refuse, so the instance
 * could not start there. A bridge-level ACL filters the traffic between the bridge and the
 * host or outside in the inet family, which every kernel has; on a bridge that only
 * proxy-only instances use that is exactly the traffic to filter. The NICs get
 * `security.port_isolation`, so proxy-only instances do not reach each other either. The
 * same way isb egress sandboxes work (rpc/sandbox/egress/egress.ts).
 *
 * The bridge and its ACL are only ever changed when they carry the mark
 * {@link KEY_ISX_ROLE}` = proxy-only`; a network of that name without it is refused.
 *
 * @module
 */

import {
  type AclRule,
  type Device,
  type IncusClient,
  IsbError,
  isNotFound,
  type NetworkAclPut,
  retryLinkRace,
  SYSTEM_CLOCK,
  valueIfFound,
} from "../../rpc/base.ts";

/** An instance's network mode. */
export type NetworkMode = "full" | "proxy-only" | "airgap";

/** The proxy-only bridge's default name. */
export const PROXY_ONLY_BRIDGE = "isxproxy0";
/** Where the proxy-only bridge's /24 comes from by default. */
export const PROXY_ONLY_SUBNETS = "10.78.0.0/16";
/** The mark on isx's networks and ACLs (the proxy looks for the same key and value). */
export const KEY_ISX_ROLE = "user.isx.role";
/** The value of {@link KEY_ISX_ROLE} on the proxy-only bridge and its ACL. */
export const ROLE_PROXY_ONLY = "proxy-only";

/** The proxy's ports a proxy-only guest may reach on its gateway. */
export interface ProxyPorts {
  /** TLS interception (443). */
  tls: number;
  /** Forward proxy (3128). */
  forward: number;
}

/** The default proxy ports (team contract). */
export const DEFAULT_PROXY_PORTS: ProxyPorts = { tls: 443, forward: 3128 };

/** The ACL name of a proxy-only bridge. */
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

/** Where the proxy is, for every network mode. */
export interface ProxyPlace {
  /** The default bridge (full instances; its MTU is copied). */
  bridge: string;
  /** The proxy-only bridge (default {@link PROXY_ONLY_BRIDGE}). */
  proxyOnlyBridge?: string;
  /** Where the proxy-only bridge's /24 comes from (default {@link PROXY_ONLY_SUBNETS}). */
  subnets?: string;
  /** The proxy's ports (default 443 and 3128). */
  ports?: ProxyPorts;
}

/** The ACL body of a proxy-only bridge: the gateway's proxy ports and DNS, nothing else. */
export function proxyOnlyAcl(gateway: string, ports: ProxyPorts = DEFAULT_PROXY_PORTS): {
  description: string;
  egress: AclRule[];
  ingress: AclRule[];
  config: Record<string, string>;
} {
  const to = (protocol: string, port: string, description: string): AclRule => ({
    action: "allow",
    state: "enabled",
    protocol,
    destination: `${gateway}/32`,
    destination_port: port,
    description,
  });
  const proxy = [...new Set([ports.tls, ports.forward])].sort((a, b) => a - b).join(",");
  return {
    description: "isx: proxy-only instances reach only the proxy and DNS on the gateway",
    egress: [
      to("tcp", proxy, "the isx proxy"),
      to("udp", "53", "DNS on the bridge"),
      to("tcp", "53", "DNS on the bridge"),
    ],
    ingress: [],
    config: { [KEY_ISX_ROLE]: ROLE_PROXY_ONLY },
  };
}

/** The config of a new proxy-only bridge: no NAT, no routing, no IPv6, the ACL bound. */
export function proxyOnlyNetworkConfig(
  opts: { address: string; acl: string; mtu?: string | undefined },
): Record<string, string> {
  return {
    "ipv4.address": opts.address,
    "ipv4.nat": "false",
    "ipv4.routing": "false",
    "ipv6.address": "none",
    ...(opts.mtu ? { "bridge.mtu": opts.mtu } : {}),
    "security.acls": opts.acl,
    "security.acls.default.egress.action": "reject",
    "security.acls.default.ingress.action": "reject",
    [KEY_ISX_ROLE]: ROLE_PROXY_ONLY,
  };
}

/**
 * A free `/24` out of `pool` (`A.B.0.0/16`): `A.B.N.1/24`, N counting down from 254 so it
 * rarely meets isb's egress bridges (which hash their start). `used` are other networks'
 * `ipv4.address` values. A fixed pick, not `auto`, which makes incusd probe random 10.x
 * addresses through the default route.
 */
export function pickFreeSubnet(pool: string, used: readonly string[]): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.0\.0\/16$/.exec(pool.trim());
  if (!m) throw new IsbError("invalid", `proxy-only subnets "${pool}": expected A.B.0.0/16`);
  const prefix = `${m[1]}.${m[2]}.`;
  const taken = new Set(
    used.filter((a) => a.startsWith(prefix)).map((a) =>
      Number(a.slice(prefix.length).split(".")[0])
    ),
  );
  for (let n = 254; n >= 1; n--) if (!taken.has(n)) return `${prefix}${n}.1/24`;
  throw new IsbError("invalid", `proxy-only subnets "${pool}": no free /24 left`);
}

/** Creates the proxy-only bridge and its ACL when missing, or brings them to the rules. */
export async function ensureProxyOnlyBridge(
  client: IncusClient,
  place: ProxyPlace,
): Promise<{ bridge: string; gateway: string }> {
  const h = client.withProject("default");
  const bridge = place.proxyOnlyBridge ?? PROXY_ONLY_BRIDGE;
  const acl = aclName(bridge);
  const ports = place.ports ?? DEFAULT_PROXY_PORTS;
  let net = await valueIfFound(() => h.getNetwork(bridge));
  if (net && net.config[KEY_ISX_ROLE] !== ROLE_PROXY_ONLY) {
    throw new IsbError(
      "invalid",
      `prepare the proxy-only network "${bridge}": it exists and is not isx's (no ${KEY_ISX_ROLE}=${ROLE_PROXY_ONLY})`,
    );
  }
  const address = net?.config["ipv4.address"] ??
    pickFreeSubnet(
      place.subnets ?? PROXY_ONLY_SUBNETS,
      (await h.listNetworks()).map((n) => n.config?.["ipv4.address"] ?? ""),
    );
  const gateway = address.split("/")[0]!;
  await ensureAcl(h, acl, proxyOnlyAcl(gateway, ports));
  if (!net) {
    const like = await valueIfFound(() => h.getNetwork(place.bridge));
    const config = proxyOnlyNetworkConfig({ address, acl, mtu: like?.config["bridge.mtu"] });
    try {
      await retryLinkRace(SYSTEM_CLOCK, () =>
        h.createNetwork({
          name: bridge,
          type: "bridge",
          description: "isx: proxy-only instances (reach only the isx proxy)",
          config,
        }, { step: `create network ${bridge}` }));
    } catch (e) {
      if (!(e instanceof IsbError && e.code === "already_exists")) throw e; // a racing creator
      net = await valueIfFound(() => h.getNetwork(bridge));
      if (net?.config[KEY_ISX_ROLE] !== ROLE_PROXY_ONLY) throw e;
      return { bridge, gateway: bridgeIpOf(net.config, bridge) };
    }
    return { bridge, gateway };
  }
  const want = proxyOnlyNetworkConfig({ address, acl });
  const drift = Object.entries(want).filter(([k, v]) => net!.config[k] !== v);
  if (drift.length > 0) {
    await retryLinkRace(
      SYSTEM_CLOCK,
      () =>
        h.patchNetwork(bridge, { config: Object.fromEntries(drift) }, {
          step: `update network ${bridge}`,
        }),
    );
  }
  return { bridge, gateway: bridgeIpOf(net.config, bridge) };
}

function bridgeIpOf(config: Record<string, string>, bridge: string): string {
  const ip = config["ipv4.address"]?.split("/")[0];
  if (!ip || !/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) {
    throw new IsbError("invalid", `read the gateway of bridge "${bridge}": no IPv4 address`);
  }
  return ip;
}

async function ensureAcl(
  h: IncusClient,
  name: string,
  body: ReturnType<typeof proxyOnlyAcl>,
): Promise<void> {
  const have = await valueIfFound(() => h.getNetworkAcl(name));
  if (!have) {
    try {
      await h.createNetworkAcl({ name, ...body }, { step: `create network ACL ${name}` });
    } catch (e) {
      if (!(e instanceof IsbError && e.code === "already_exists")) throw e; // a racing creator
    }
    return;
  }
  if (have.config[KEY_ISX_ROLE] !== ROLE_PROXY_ONLY) {
    throw new IsbError(
      "invalid",
      `prepare the network ACL "${name}": it exists and is not isx's (no ${KEY_ISX_ROLE}=${ROLE_PROXY_ONLY})`,
    );
  }
  if (JSON.stringify(have.egress.map(pick)) !== JSON.stringify(body.egress.map(pick))) {
    await h.putNetworkAcl(name, body as NetworkAclPut, { step: `update network ACL ${name}` });
  }
}

function pick(r: AclRule): string {
  return [r.action, r.protocol, r.destination, r.destination_port].join(" ");
}

/** The NIC of a proxy-only instance. */
export function proxyOnlyNic(bridge: string): Device {
  return { type: "nic", name: "eth0", network: bridge, "security.port_isolation": "true" };
}

/** What a network mode means for the copy request. */
export interface NetworkSetup {
  /** Device overrides. */
  devices: Record<string, Device>;
  /** For proxy-only: the gateway the guest's proxy settings must name. */
  gateway?: string;
}

/** The device overrides of a copy request for a network mode (the bridge made if needed). */
export async function networkDevices(
  client: IncusClient,
  mode: NetworkMode,
  place: ProxyPlace,
): Promise<NetworkSetup> {
  if (mode === "full") return { devices: {} };
  if (mode === "airgap") return { devices: { eth0: { type: "none" } } };
  const { bridge, gateway } = await ensureProxyOnlyBridge(client, place);
  return { devices: { eth0: proxyOnlyNic(bridge) }, gateway };
}
