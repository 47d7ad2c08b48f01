/**
 * The suite's own corner of the user's Incus (issue 19: the suite is a guest on the user's
 * machine). A *lab* is an Incus project `isxtest-<id>` (its own instances, images, volumes
 * and profiles), a bridge `isxtest<id>` its default profile's NIC is on, and the name of its
 * proxy-only bridge `isxtestp<id>` (made by the tests that need one). Every live test runs in
 * one, so nothing it makes lands in a project, on a bridge or in an isx home of the user, and
 * a test proxy listens on the lab bridge's gateway, never on the user's proxy's address.
 *
 * Why a project with its own images (copied from the default project, same fingerprint, so
 * the copy is a database row, not data): `features.images=false` would make every launch
 * and any image the suite made land in the user's project. Why the bridges live in the
 * default project's network namespace: Incus only makes bridges there
 * (`features.networks=false`); they are the suite's all the same (name, mark
 * `user.isxtest.lab`), and `isx` finds them by name through the test homes' `config.yaml`.
 *
 * Every name starts with {@link LAB_PREFIX}; the snapshot of the user's side
 * (tests/guest/user_side.ts) leaves out exactly what carries it. A lab records its owner
 * (pid and start time); {@link sweepLabs} removes the labs whose owner is gone, so a killed
 * run is cleaned up by the next one without touching a lab another run is using.
 *
 * @module
 */

import { type IncusClient, isNotFound } from "../../rpc/mod.ts";

/** What every resource the suite makes in Incus (and its nft tables) is named with. */
export const LAB_PREFIX = "isxtest";

/** The mark on a lab's project and bridges (value: the lab's project). */
export const LAB_MARK = "user.isxtest.lab";
/** The owner of a lab: `<pid>:<start time in clock ticks>` of the process that made it. */
export const LAB_OWNER = "user.isxtest.owner";

/** The images a lab gets (those of them the default project has, under the same alias). */
export const LAB_IMAGES: readonly string[] = ["debian-base", "dev-base"];

/** One lab's names. */
export interface Lab {
  /** Its id (6 hex digits). */
  id: string;
  /** The Incus project (`isxtest-<id>`). */
  project: string;
  /** The bridge its default profile's NIC is on (`isxtest<id>`). */
  bridge: string;
  /** The proxy-only bridge tests make when they need one (`isxtestp<id>`). */
  proxyOnlyBridge: string;
}

/** The names of lab `id`. */
export function labNames(id: string): Lab {
  if (!/^[0-9a-f]{6}$/.test(id)) throw new TypeError(`lab id "${id}" is not 6 hex digits`);
  return {
    id,
    project: `${LAB_PREFIX}-${id}`,
    bridge: `${LAB_PREFIX}${id}`,
    proxyOnlyBridge: `${LAB_PREFIX}p${id}`,
  };
}

/** A new lab id. */
export function newLabId(): string {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 6);
}

/** True for a name the suite made (project, network, ACL, nft table, ...). */
export function isLabName(name: string): boolean {
  return name.startsWith(LAB_PREFIX) || name.includes(`_${LAB_PREFIX}`) ||
    name.includes(`-${LAB_PREFIX}`);
}

/** `<pid>:<start time>` of `pid`, or undefined when no such process runs. */
export function processStamp(pid: number): string | undefined {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // the fields after the command name (which may hold spaces) start after the last ')'
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    return start ? `${pid}:${start}` : undefined;
  } catch {
    return undefined;
  }
}

/** True while the owner stamp names a running process (the same one: pid and start time). */
export function ownerAlive(owner: string | undefined): boolean {
  const pid = Number(owner?.split(":")[0]);
  return Number.isInteger(pid) && pid > 0 && processStamp(pid) === owner;
}

interface ProjectRow {
  name: string;
  config: Record<string, string>;
}

/** The labs Incus has now, with their owners. */
export async function listLabs(incus: IncusClient): Promise<{ lab: Lab; owner?: string }[]> {
  const h = incus.withProject("default");
  const r = await h.call("GET", "/1.0/projects", { query: { recursion: 1 } });
  const rows = (r.kind === "sync" ? r.metadata : []) as ProjectRow[];
  const out: { lab: Lab; owner?: string }[] = [];
  for (const p of rows) {
    const m = /^isxtest-([0-9a-f]{6})$/.exec(p.name);
    if (!m || p.config?.[LAB_MARK] !== p.name) continue;
    const owner = p.config[LAB_OWNER];
    out.push({ lab: labNames(m[1]!), ...(owner ? { owner } : {}) });
  }
  return out;
}

/**
 * Makes lab `id` owned by `owner` (default: this process): the project, its images, the
 * bridge and the default profile (root disk on the pool the default project's default
 * profile uses, `eth0` on the lab bridge). Half-made labs are removed before the error
 * propagates.
 */
export async function createLab(
  incus: IncusClient,
  id: string,
  owner = processStamp(Deno.pid),
): Promise<Lab> {
  const lab = labNames(id);
  const user = incus.withProject("default");
  const mine = incus.withProject(lab.project);
  try {
    await user.call("POST", "/1.0/projects", {
      body: {
        name: lab.project,
        description: "isx test suite (removed when the run ends)",
        config: {
          "features.images": "true",
          "features.profiles": "true",
          "features.storage.volumes": "true",
          "features.storage.buckets": "true",
          "features.networks": "false",
          [LAB_MARK]: lab.project,
          ...(owner ? { [LAB_OWNER]: owner } : {}),
        },
      },
    });
    // read-only looks at the user's side: the bridge MTU and the pool of their default profile
    const like = await user.getNetwork("incusbr0").then((n) => n.value, () => undefined);
    const profile = await user.call("GET", "/1.0/profiles/default");
    const devices = (profile.kind === "sync"
      ? (profile.metadata as { devices?: Record<string, Record<string, string>> }).devices
      : undefined) ?? {};
    const pool = Object.values(devices).find((d) =>
      d.type === "disk" && d.path === "/"
    )?.pool ??
      "default";
    await user.createNetwork({
      name: lab.bridge,
      type: "bridge",
      description: `isx test suite lab ${lab.project}`,
      config: {
        "ipv4.address": await freeSubnet(user),
        "ipv4.nat": "true",
        "ipv6.address": "none",
        ...(like?.config["bridge.mtu"] ? { "bridge.mtu": like.config["bridge.mtu"] } : {}),
        [LAB_MARK]: lab.project,
      },
    }, { step: `create lab bridge ${lab.bridge}` });
    await mine.call("PUT", "/1.0/profiles/default", {
      body: {
        description: "isx test suite",
        config: {},
        devices: {
          root: { type: "disk", path: "/", pool },
          eth0: { type: "nic", name: "eth0", network: lab.bridge },
        },
      },
    });
    for (const alias of new Set([...LAB_IMAGES, Deno.env.get("ISX_TEST_IMAGE") ?? ""])) {
      if (!alias) continue;
      const target = await user.getImageAlias(alias).then((a) => a.target, (e) => {
        if (isNotFound(e)) return undefined;
        throw e;
      });
      if (!target) continue;
      // same server, same fingerprint: the image's data is shared, only the record is new
      const op = await mine.call("POST", "/1.0/images", {
        body: {
          source: {
            type: "image",
            mode: "pull",
            protocol: "incus",
            server: "",
            fingerprint: target,
            project: "default",
          },
          aliases: [{ name: alias }],
        },
      });
      if (op.kind === "async") await mine.waitOperation(op, { step: `copy image ${alias}` });
    }
    return lab;
  } catch (e) {
    await removeLab(incus, lab).catch(() => {});
    throw e;
  }
}

/**
 * A free `10.X.Y.1/24` for a lab bridge (Incus's `auto` needs a probe this host may not
 * allow): X from 96 to 127, clear of every network's and host interface's /24, so never the
 * range the user's bridges or isx's proxy-only bridges (10.78.0.0/16) use by default.
 */
async function freeSubnet(user: IncusClient): Promise<string> {
  const used = new Set<string>();
  for (const n of await user.listNetworks()) {
    const a = n.config?.["ipv4.address"];
    if (a) used.add(a.split(".").slice(0, 3).join("."));
  }
  for (const i of Deno.networkInterfaces()) {
    if (i.family === "IPv4") used.add(i.address.split(".").slice(0, 3).join("."));
  }
  for (let tries = 0; tries < 1000; tries++) {
    const net = `10.${96 + Math.floor(Math.random() * 32)}.${Math.floor(Math.random() * 256)}`;
    if (!used.has(net)) return `${net}.1/24`;
  }
  throw new Error("no free 10.96.0.0/11 /24 for a lab bridge");
}

/**
 * Removes lab `lab` whole: the project with everything in it (`force`), then its bridges,
 * the networks and ACLs that name it and the isb egress bridges of its sandboxes. Idempotent.
 */
export async function removeLab(incus: IncusClient, lab: Lab): Promise<void> {
  const user = incus.withProject("default");
  await user.call("DELETE", `/1.0/projects/${lab.project}`, { query: { force: true } }).catch(
    (e) => {
      if (!isNotFound(e)) throw e;
    },
  );
  const gone = (e: unknown) => {
    if (!isNotFound(e)) throw e;
  };
  const nets = await user.listNetworks();
  const acls = new Set<string>();
  for (const n of nets) {
    // its bridges, and the egress bridges isb made for the lab's sandboxes (named by a digest)
    const egress = n.config?.["user.isb.egress-for"]?.startsWith(`${lab.project}/`) ?? false;
    if (
      n.name.includes(lab.id) && isLabName(n.name) || n.config?.[LAB_MARK] === lab.project || egress
    ) {
      for (const a of (n.config?.["security.acls"] ?? "").split(",")) if (egress && a) acls.add(a);
      await user.deleteNetwork(n.name, { step: `delete lab network ${n.name}` }).catch(gone);
    }
  }
  for (const a of await user.listNetworkAcls()) {
    if (
      acls.has(a.name) || a.name.includes(`${LAB_PREFIX}p${lab.id}`) ||
      a.name.includes(`${LAB_PREFIX}${lab.id}`)
    ) {
      await user.deleteNetworkAcl(a.name, { step: `delete lab ACL ${a.name}` }).catch(gone);
    }
  }
  removeLabLogs(lab);
}

/**
 * Incus keeps the log directory of a deleted instance and a deleted bridge's dnsmasq log in
 * `/var/log/incus` (on this host; nothing when Incus is elsewhere): a lab's go with it.
 */
export function removeLabLogs(lab: Lab, dir = "/var/log/incus"): void {
  let names: string[];
  try {
    names = [...Deno.readDirSync(dir)].map((e) => e.name);
  } catch {
    return;
  }
  for (const n of names) {
    const mine = n.startsWith(`${lab.project}_`) ||
      (/^dnsmasq\.isxtest[a-z]?[0-9a-f]{6}\.log$/.test(n) && n.includes(lab.id));
    if (mine) {
      try {
        Deno.removeSync(`${dir}/${n}`, { recursive: true });
      } catch { /* Incus still writes it, or it is gone */ }
    }
  }
}

/** Removes every lab whose owner no longer runs; returns their projects. */
export async function sweepLabs(incus: IncusClient): Promise<string[]> {
  const removed: string[] = [];
  for (const { lab, owner } of await listLabs(incus)) {
    if (ownerAlive(owner)) continue;
    await removeLab(incus, lab);
    removed.push(lab.project);
  }
  return removed;
}

let active: Lab | undefined;

/** Records the lab this test file runs in (tests/helpers/live.ts, once it exists). */
export function setActiveLab(lab: Lab): void {
  active = lab;
}

/** The lab this test file runs in, if tests/helpers/live.ts made or found one. */
export function activeLab(): Lab | undefined {
  return active;
}

/**
 * The `proxy:` block of a test home's `config.yaml`: the lab's bridges, and an ops port of
 * the test's own (the user's proxy holds 127.0.0.1:18080). `health` 9: nothing answers there,
 * so preflight and activity see no proxy.
 */
export function labProxyYaml(
  lab: Lab | undefined = active,
  ports: { tls?: number; forward?: number; health?: number } = { health: 9 },
  extra = "",
): string {
  const p = Object.entries(ports).map(([k, v]) => `${k}: ${v}`).join(", ");
  const bridges = lab
    ? `  bridge: ${lab.bridge}\n  proxy_only_bridge: ${lab.proxyOnlyBridge}\n`
    : "";
  return `proxy:\n${bridges}  ports: {${p}}\n${extra}`;
}
