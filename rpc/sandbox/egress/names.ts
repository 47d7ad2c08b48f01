/**
 * The incus side of a sandbox's egress policy (isb-rpc.md §13), as pure data: the names of
 * its bridge and ACL, the placeholders its secrets become, the config keys and NIC the
 * instance gets, and the bridge config and ACL body `apply` has to create. Nothing here
 * talks to incus; the I/O side (bridge, ACL, CA) consumes {@link EgressPlan}.
 *
 * SHA-256 comes from `rpc/sha256.ts` (synchronous, as resolution must stay pure): importing
 * `node:crypto` for it started Deno's Node layer in every `isb rpc` (~12 ms before the first
 * answer; see docs/decisions.md).
 *
 * @module
 */

import { sha256Hex } from "../../sha256.ts";
// the policy without the spec's schemas (egress.ts builds them)
import {
  type EgressPolicy,
  egressPolicy,
  type EgressSpec,
  entryString,
} from "../spec/egress_policy.ts";

/** Egress bridges are `isbbrx<8 hex>`. */
export const EGRESS_NET_PREFIX = "isbbrx";
/** Marks the bridge, ACL and instance as one sandbox's egress: `project/instance`. */
export const KEY_EGRESS_FOR = "user.isb.egress-for";
/** The policy as JSON, on the bridge and the instance. */
export const KEY_EGRESS_POLICY = "user.isb.egress";
/** When the bridge was made (unix seconds). */
export const KEY_EGRESS_CREATED = "user.isb.egress-created";
/** The fingerprint of the CA the guest trusts, once it does. */
export const KEY_EGRESS_CA = "user.isb.egress-ca";
/** Where the guest finds the CA bundle and the CA certificate. */
export const EGRESS_CA_BUNDLE = "/etc/isb/egress-ca-bundle.pem";
/** The CA certificate pushed into the guest. */
export const EGRESS_CA_CERT = "/etc/isb/egress-ca.crt";

/** First 4 bytes (hex) of SHA-256 of `isb-egress\0<project>\0<instance>`. */
export function egressDigest8(project: string, instance: string): string {
  return sha256Hex(`isb-egress\0${project}\0${instance}`).slice(0, 8);
}

/** The egress bridge of sandbox `instance` in incus project `project`. */
export function egressNetworkName(project: string, instance: string): string {
  return `${EGRESS_NET_PREFIX}${egressDigest8(project, instance)}`;
}

/** The egress ACL of the same sandbox. */
export function egressAclName(project: string, instance: string): string {
  return `isbx-${egressDigest8(project, instance)}`;
}

/** What the guest sees instead of a secret: derived from the bridge and the variable. */
export function egressPlaceholder(bridge: string, env: string): string {
  return `isb_placeholder_${sha256Hex(`isb-egress-placeholder\0${bridge}\0${env}`).slice(0, 32)}`;
}

/** Everything about one sandbox's egress plumbing. */
export interface EgressPlan {
  /** The Incus project of the instance. */
  project: string;
  /** The instance the plumbing belongs to. */
  instance: string;
  /** The bridge (created in project `default`). */
  network: string;
  /** The network ACL on the bridge. */
  acl: string;
  /** The validated policy the ACL and the proxy enforce. */
  policy: EgressPolicy;
  /** The NIC device `eth0`. */
  nic: Record<string, string>;
  /** Config keys the instance gets (policy, owner, placeholders, CA settings). */
  config: Record<string, string>;
}

/** `project/instance`, the value of `user.isb.egress-for`. */
export function egressOwner(plan: EgressPlan): string {
  return `${plan.project}/${plan.instance}`;
}

/** The policy as stored in `user.isb.egress` (keys sorted, as the Rust side writes it). */
export function egressPolicyJson(plan: EgressPlan): string {
  return JSON.stringify({
    entries: plan.policy.entries.map(entryString),
    instance: plan.instance,
    project: plan.project,
    secrets: plan.policy.secrets.map((s) => ({
      env: s.env,
      hosts: s.hosts.map(entryString),
      placeholder: s.placeholder,
      secret: s.secret,
    })),
  });
}

/** Validates `spec` for `instance` in `project` and says what it adds. Throws `invalid`. */
export function egressPlan(spec: EgressSpec, project: string, instance: string): EgressPlan {
  const network = egressNetworkName(project, instance);
  const acl = egressAclName(project, instance);
  const policy = egressPolicy(spec, (env) => egressPlaceholder(network, env));
  const plan: EgressPlan = { project, instance, network, acl, policy, nic: {}, config: {} };
  plan.nic = {
    type: "nic",
    name: "eth0",
    network,
    "security.acls": acl,
    "security.acls.default.egress.action": "drop",
    "security.acls.default.ingress.action": "allow",
  };
  const config: Record<string, string> = {
    [KEY_EGRESS_POLICY]: egressPolicyJson(plan),
    [KEY_EGRESS_FOR]: egressOwner(plan),
  };
  for (const s of policy.secrets) config[`environment.${s.env}`] = s.placeholder;
  if (policy.secrets.length > 0) {
    for (const k of ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"]) {
      config[`environment.${k}`] = EGRESS_CA_BUNDLE;
    }
    config["environment.NODE_EXTRA_CA_CERTS"] = EGRESS_CA_CERT;
  }
  plan.config = config;
  return plan;
}

/** The names dnsmasq answers for: an exact name, or a wildcard's domain. */
export function egressDnsNames(policy: EgressPolicy): string[] {
  return [...new Set(policy.entries.map((e) => e.host))].sort();
}

/** The bridge's `raw.dnsmasq`: no upstream, answers only for allowed names ("" for none). */
export function egressDnsmasq(policy: EgressPolicy, ip: string): string {
  if (policy.entries.length === 0) return "";
  return ["no-resolv", "no-hosts", "address=/#/"]
    .concat(egressDnsNames(policy).map((n) => `address=/${n}/${ip}`))
    .join("\n");
}

/**
 * The bridge's config: `ipv4.address` `none` for a policy that allows nothing, else `auto`;
 * no NAT, no routing, no IPv6; `raw.dnsmasq` once the bridge's address is known.
 */
export function egressNetworkConfig(
  plan: EgressPlan,
  opts: { ip?: string | undefined; created: number },
): Record<string, string> {
  const none = plan.policy.entries.length === 0;
  const c: Record<string, string> = {
    "ipv4.address": none ? "none" : "auto",
    "ipv4.nat": "false",
    "ipv4.routing": "false",
    "ipv6.address": "none",
    [KEY_EGRESS_FOR]: egressOwner(plan),
    [KEY_EGRESS_POLICY]: egressPolicyJson(plan),
    [KEY_EGRESS_CREATED]: String(opts.created),
  };
  if (!none && opts.ip !== undefined) c["raw.dnsmasq"] = egressDnsmasq(plan.policy, opts.ip);
  return c;
}

/** The ACL body: TCP to the bridge address on the policy's ports, nothing else. */
export function egressAclBody(plan: EgressPlan, ip: string): {
  description: string;
  ingress: [];
  egress: Record<string, string>[];
  config: Record<string, string>;
} {
  const ports = [...new Set(plan.policy.entries.map((e) => e.port))].sort((a, b) => a - b);
  return {
    description: `isb egress for ${egressOwner(plan)}`,
    ingress: [],
    egress: ports.length === 0 ? [] : [{
      action: "allow",
      state: "enabled",
      protocol: "tcp",
      destination: `${ip}/32`,
      destination_port: ports.join(","),
      description: "the egress proxy",
    }],
    config: { [KEY_EGRESS_FOR]: egressOwner(plan) },
  };
}
