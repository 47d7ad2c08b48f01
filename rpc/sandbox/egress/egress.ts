/**
 * The I/O side of a sandbox's egress (isb-rpc.md §13): the bridge and ACL in Incus project
 * `default`, the host files of its secrets, and the guest's trust in the CA. The names and
 * bodies are computed purely in `names.ts` ({@link EgressPlan}); this module only
 * brings Incus and the state directory to them.
 *
 * - The bridge neither NATs nor routes; its dnsmasq answers only the allowed names (with the
 *   bridge address); with `egress: none` it has no address at all.
 * - The ACL allows only TCP to the bridge's own address on the policy's ports (where an
 *   egress proxy listens), default egress `drop`. Incus enforces it, so a guest reaches
 *   nothing else even without a proxy.
 * - Deviation from isb: the ACL is bound on the BRIDGE (`security.acls*` in its config), not
 *   on the NIC. Per-NIC ACLs on a bridged NIC make Incus load bridge-family nftables rules
 *   with `ct state`, which kernels without bridge conntrack refuse (the instance then fails
 *   to start, as on the build machines); the bridge serves this one sandbox, so binding the
 *   ACL there filters exactly the same traffic. The NIC is `{type: nic, name: eth0,
 *   network: <bridge>}` ({@link egressNic}).
 * - With `ISB_EGRESS_SUBNETS=A.B.0.0/16` in the server's environment the bridge gets a fixed
 *   `/24` from that range (`pickSubnet` in `_bridge.ts`) instead of `auto`.
 * - A bridge or ACL is only ever changed or deleted when it carries our
 *   `user.isb.egress-for` mark (`project/instance`).
 *
 * @module
 */

import { IsbError, isNotFound, valueIfFound } from "../../errors.ts";
import { type Clock, SYSTEM_CLOCK } from "../../clock.ts";
import { bridgeAddress, retryLinkRace } from "./_bridge.ts";
import type { IncusClient, Network, NetworkAclPut } from "../../incus/mod.ts";
import {
  egressAclBody,
  egressAclName,
  egressNetworkConfig,
  egressNetworkName,
  egressOwner,
  type EgressPlan,
  KEY_EGRESS_CREATED,
  KEY_EGRESS_FOR,
} from "./names.ts";
import {
  ensureCa,
  forgetEgress,
  installCa,
  kick,
  loadCa,
  secretValues,
  writeSecretsFile,
} from "./_ca.ts";

/** The address of a bridge, from its `ipv4.address` (`10.1.2.1/24`). */
export function bridgeIp(net: Network): string | undefined {
  const a = (net.config?.["ipv4.address"] ?? "").split("/")[0] ?? "";
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(a) ? a : undefined;
}

/** What the egress steps need besides the plan. */
export interface EgressContext {
  /** The isb state directory (CA, secrets). */
  stateDir: string;
  /** The server's environment (secret values). */
  env: Readonly<Record<string, string>>;
  /** Wall-clock milliseconds (the bridge's creation stamp). */
  wallNow: () => number;
  /** For pauses between retries; the real clock when absent. */
  clock?: Clock | undefined;
  progress?: ((line: string) => void) | undefined;
}

/**
 * Before the instance is created or changed: secret values checked, the CA and the secrets
 * file written, then the bridge and ACL. Returns the bridge address ("" for `none`).
 */
export async function beforeApply(
  incus: IncusClient,
  plan: EgressPlan,
  ctx: EgressContext,
): Promise<string> {
  if (plan.policy.secrets.length > 0) {
    const values = secretValues(plan.policy.secrets, ctx.env);
    await ensureCa(ctx.stateDir, plan.network);
    await writeSecretsFile(ctx.stateDir, {
      bridge: plan.network,
      owner: egressOwner(plan),
      secrets: plan.policy.secrets,
      values,
    });
  }
  const ip = await prepareNetwork(incus, plan, ctx);
  await kick(ctx.stateDir);
  return ip;
}

/** Once the instance is ready: the guest trusts the CA (with secrets only). */
export async function afterReady(
  incus: IncusClient,
  plan: EgressPlan,
  ctx: EgressContext,
): Promise<void> {
  if (plan.policy.secrets.length === 0) return;
  const ca = await loadCa(ctx.stateDir, plan.network);
  if (!ca) {
    throw new IsbError(
      "invalid",
      `${plan.instance}: the egress CA is missing from this host's state directory; recreate the sandbox`,
    );
  }
  await installCa(incus, plan.instance, ca);
}

/** The ACL keys the bridge carries (network-level ACL; see the module doc). */
export function bridgeAclConfig(plan: EgressPlan): Record<string, string> {
  return {
    "security.acls": plan.acl,
    "security.acls.default.egress.action": "drop",
    "security.acls.default.ingress.action": "allow",
  };
}

/** The NIC a sandbox with egress gets: on its own bridge, the ACL bound there. */
export function egressNic(plan: EgressPlan): Record<string, string> {
  return { type: "nic", name: "eth0", network: plan.network };
}

/** Makes the bridge and ACL, or brings existing ones to the plan; returns the bridge IP. */
export async function prepareNetwork(
  incus: IncusClient,
  plan: EgressPlan,
  ctx: EgressContext,
): Promise<string> {
  const h = incus.withProject("default");
  const owner = egressOwner(plan);
  const none = plan.policy.entries.length === 0;
  const pool = ctx.env.ISB_EGRESS_SUBNETS || undefined;
  const clock = ctx.clock ?? SYSTEM_CLOCK;
  let net = await valueIfFound(() => h.getNetwork(plan.network));
  if (net) {
    if (net.config?.[KEY_EGRESS_FOR] !== owner) {
      throw new IsbError(
        "invalid",
        `network ${plan.network} exists and is not the egress network of ${owner}`,
      );
    }
  } else {
    ctx.progress?.(`${plan.instance}: creating egress network ${plan.network}`);
    const config = egressNetworkConfig(plan, { created: Math.floor(ctx.wallNow() / 1000) });
    if (!none) config["ipv4.address"] = await bridgeAddress(h, plan, pool);
    await retryLinkRace(clock, () =>
      h.createNetwork({
        name: plan.network,
        type: "bridge",
        description: `isb egress for ${owner}`,
        config,
      }, { step: `create network ${plan.network}` }));
    net = (await h.getNetwork(plan.network)).value;
  }
  if (!none && bridgeIp(net) === undefined) {
    // It was `egress: none`, without an address: give the bridge one.
    const address = await bridgeAddress(h, plan, pool);
    await retryLinkRace(
      clock,
      () =>
        h.patchNetwork(plan.network, { config: { "ipv4.address": address } }, {
          step: `give network ${plan.network} an address`,
        }),
    );
    net = (await h.getNetwork(plan.network)).value;
  }
  const ip = bridgeIp(net) ?? "";
  if (!none && ip === "") {
    throw new IsbError("invalid", `network ${plan.network} has no IPv4 address`);
  }
  // The ACL first: the bridge may only name an ACL that exists.
  const body = egressAclBody(plan, ip) as unknown as NetworkAclPut;
  const acl = await valueIfFound(() => h.getNetworkAcl(plan.acl));
  if (!acl) {
    await h.createNetworkAcl({ name: plan.acl, ...body }, { step: `create ACL ${plan.acl}` });
  } else if (JSON.stringify(pickAcl(acl)) !== JSON.stringify(pickAcl(body))) {
    await h.putNetworkAcl(plan.acl, body, { step: `update ACL ${plan.acl}` });
  }
  const want = {
    ...egressNetworkConfig(plan, { ip: ip || undefined, created: 0 }),
    ...bridgeAclConfig(plan),
  };
  delete want[KEY_EGRESS_CREATED];
  if (!none) delete want["ipv4.address"];
  const have = net.config ?? {};
  const cfg: Record<string, string> = { ...have };
  let changed = false;
  for (const [k, v] of Object.entries(want)) {
    if (have[k] !== v) {
      cfg[k] = v;
      changed = true;
    }
  }
  if (!("raw.dnsmasq" in want) && "raw.dnsmasq" in have) {
    delete cfg["raw.dnsmasq"];
    changed = true;
  }
  if (changed) {
    ctx.progress?.(`${plan.instance}: updating egress network ${plan.network}`);
    const description = net.description ?? "";
    await retryLinkRace(clock, () =>
      h.putNetwork(plan.network, { description, config: cfg }, {
        step: `update network ${plan.network}`,
      }));
  }
  await allowInProject(incus, plan.network, true);
  return ip;
}

/** The parts of an ACL we set, with Incus's empty rule fields dropped (for comparison). */
function pickAcl(
  a: { description?: string; egress?: unknown[]; ingress?: unknown[]; config?: unknown },
) {
  const rules = (rs: unknown[] | undefined) =>
    (rs ?? []).map((r) =>
      Object.fromEntries(
        Object.entries(r as Record<string, unknown>).filter(([, v]) => v !== "").sort(),
      )
    );
  return [a.description ?? "", rules(a.egress), rules(a.ingress), a.config ?? {}];
}

/** A restricted project lists the networks its instances may use; keep ours on that list. */
async function allowInProject(incus: IncusClient, network: string, add: boolean) {
  const project = incus.project || "default";
  if (project === "default") return;
  const h = incus.withProject("default");
  const path = `/1.0/projects/${encodeURIComponent(project)}`;
  let proj: { config?: Record<string, string>; description?: string };
  try {
    proj = (await h.conn.sync<typeof proj>("GET", path)).metadata;
  } catch (e) {
    if (isNotFound(e)) return;
    throw e;
  }
  const cfg = proj.config ?? {};
  if (cfg.restricted !== "true") return;
  const names = (cfg["restricted.networks.access"] ?? "").split(",").map((s) => s.trim())
    .filter((s) => s !== "");
  if (add === names.includes(network)) return;
  const next = add ? [...names, network] : names.filter((n) => n !== network);
  const r = await h.call("PUT", path, {
    body: {
      description: proj.description ?? "",
      config: { ...cfg, "restricted.networks.access": next.join(",") },
    },
  });
  if (r.kind === "async") {
    await h.waitOperation(r, { step: `allow network ${network} in project ${project}` });
  }
}

/** Deletes a sandbox's bridge (only if ours), ACL and CA once its instance is gone. */
export async function teardownEgress(
  incus: IncusClient,
  opts: { instance: string; stateDir: string },
): Promise<void> {
  const project = incus.project || "default";
  const network = egressNetworkName(project, opts.instance);
  const aclName = egressAclName(project, opts.instance);
  const owner = `${project}/${opts.instance}`;
  const h = incus.withProject("default");
  const net = await valueIfFound(() => h.getNetwork(network));
  if (net) {
    if (net.config?.[KEY_EGRESS_FOR] !== owner) return; // never delete what is not ours
    await allowInProject(incus, network, false);
    await h.deleteNetwork(network, { step: `delete network ${network}` });
  }
  const acl = await valueIfFound(() => h.getNetworkAcl(aclName));
  if (acl && (acl.config?.[KEY_EGRESS_FOR] ?? owner) === owner) {
    await h.deleteNetworkAcl(aclName, { step: `delete ACL ${aclName}` });
  }
  await forgetEgress(opts.stateDir, network);
}
