/**
 * The suite is a guest on the user's machine (issue 19): scripts/test.sh runs this before
 * and after `deno test`.
 *
 * - `begin FILE [--owner-pid PID]`: removes the labs of runs that died (tests/helpers/lab.ts),
 *   writes a snapshot of the user's side to FILE, makes the suite's lab (owned by PID, the
 *   test.sh process) and prints its id (for `ISX_TEST_LAB`).
 * - `end FILE --lab ID`: removes that lab, takes the snapshot again and compares: any
 *   difference, or anything of the suite's still there, is printed and the exit code is 1.
 *
 * The user's side: in every Incus project the suite did not make, the instances (status,
 * type, config without `volatile.*`, devices, profiles), images (aliases, properties),
 * profiles and storage volumes; the managed networks and ACLs (every config key); the user's
 * proxy (`<state>/isx/proxy/proxy.pid`: pid, process start time, listeners); the nft tables
 * (names; the content of isx's limit tables; a bridge guard's content follows the running
 * instances of every project, so only its presence counts); the user's isx config directory
 * and CA (file digests); the server's config and trusted certificates; a few sysctls. The
 * one server setting the live tests may make, `core.https_address` (the remote tests: a
 * loopback address, tests/helpers/incus_remote.ts), is put back at `end` when the run began
 * without it. What the suite makes is named `isxtest…` and left
 * out, and so are the isb egress bridges (`user.isb.egress-for`) of a lab's sandboxes and
 * their ACLs. `ISX_TEST_FOREIGN` (a regular expression) leaves out more names, for a machine other
 * test runs share (never on a user's machine: it would hide what the suite did there).
 *
 * @module
 */

// deno-lint-ignore-file no-console -- a script: its report is the console
import { parseArgs } from "node:util";
import { createIncusClient, type IncusClient } from "../../rpc/mod.ts";
import {
  createLab,
  isLabName,
  LAB_PREFIX,
  labNames,
  listLabs,
  newLabId,
  ownerAlive,
  processStamp,
  removeLab,
  sweepLabs,
} from "../helpers/lab.ts";
import {
  type Change,
  diffSnapshots,
  digest,
  formatChanges,
  listenersOf,
  type Snapshot,
  stableConfig,
} from "./snapshot.ts";

const SOCKET = Deno.env.get("INCUS_SOCKET") || "/var/lib/incus/unix.socket";
const FOREIGN = Deno.env.get("ISX_TEST_FOREIGN")
  ? new RegExp(Deno.env.get("ISX_TEST_FOREIGN")!)
  : undefined;
const SYSCTLS = [
  "net/ipv4/ip_forward",
  "net/ipv4/ip_unprivileged_port_start",
  "net/bridge/bridge-nf-call-iptables",
  "net/bridge/bridge-nf-call-ip6tables",
];

/** The mark of an isb egress bridge: the `<project>/<instance>` it serves. */
const EGRESS_FOR = "user.isb.egress-for";

/** Not the user's: made by the suite, or left out by `ISX_TEST_FOREIGN`. */
function skip(name: string): boolean {
  return isLabName(name) || (FOREIGN?.test(name) ?? false);
}

async function list<T>(c: IncusClient, path: string): Promise<T[]> {
  const r = await c.call("GET", path, { query: { recursion: 1 } });
  return (r.kind === "sync" ? r.metadata : []) as T[];
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output()
    .catch(() => undefined);
  return out?.success ? new TextDecoder().decode(out.stdout) : "";
}

function files(dir: string, rel = ""): string[] {
  const out: string[] = [];
  try {
    for (const e of Deno.readDirSync(`${dir}${rel}`)) {
      const p = `${rel}/${e.name}`;
      if (e.isDirectory) out.push(...files(dir, p));
      else out.push(p);
    }
  } catch { /* absent */ }
  return out;
}

interface Row {
  name: string;
  config?: Record<string, string>;
  description?: string;
}

/** The user's side now. */
export async function snapshot(incus: IncusClient): Promise<Snapshot> {
  const s: Snapshot = {};
  const user = incus.withProject("default");
  // the server's own config (core.https_address, which the remote tests need) and its trust
  for (const [k, v] of Object.entries((await user.serverInfo()).config ?? {})) {
    s[`server ${k}`] = typeof v === "string" ? v : JSON.stringify(v);
  }
  type Cert = { name: string; type: string; fingerprint: string; restricted: boolean };
  for (const c of await list<Cert>(user, "/1.0/certificates")) {
    if (skip(c.name)) continue;
    s[`server certificate ${c.fingerprint.slice(0, 12)}`] = `${c.name} ${c.type} ${c.restricted}`;
  }
  const pools = (await list<Row>(user, "/1.0/storage-pools")).map((p) => p.name);
  for (const p of await list<Row>(user, "/1.0/projects")) {
    if (skip(p.name)) continue;
    const P = `project ${p.name}`;
    s[P] = await digest({ config: p.config, description: p.description });
    const h = incus.withProject(p.name);
    type Inst = Row & { status: string; type: string; devices: unknown; profiles: string[] };
    for (const i of await list<Inst>(h, "/1.0/instances")) {
      if (skip(i.name)) continue;
      s[`${P} instance ${i.name}`] = `${i.status} ${i.type} ${await digest({
        config: stableConfig(i.config),
        devices: i.devices,
        profiles: i.profiles,
      })}`;
    }
    type Img = {
      fingerprint: string;
      aliases: { name: string }[];
      properties: unknown;
      public: boolean;
    };
    for (const i of await list<Img>(h, "/1.0/images")) {
      s[`${P} image ${i.fingerprint.slice(0, 12)}`] = `${
        i.aliases.map((a) => a.name).sort().join(",")
      } ${await digest({ properties: i.properties, public: i.public })}`;
    }
    for (const pr of await list<Row & { devices: unknown }>(h, "/1.0/profiles")) {
      if (skip(pr.name)) continue;
      s[`${P} profile ${pr.name}`] = await digest({
        config: pr.config,
        devices: pr.devices,
        description: pr.description,
      });
    }
    for (const pool of pools) {
      for (const v of await list<Row & { type: string }>(h, `/1.0/storage-pools/${pool}/volumes`)) {
        // image volumes are the pool's cache of images, shared by every project
        if (v.type === "image" || skip(v.name)) continue;
        s[`${P} volume ${pool}/${v.type}/${v.name}`] = await digest(stableConfig(v.config));
      }
    }
  }
  const theirs = new Set<string>(); // the ACLs of the networks left out
  for (const n of await list<Row & { managed: boolean }>(user, "/1.0/networks")) {
    if (!n.managed) continue;
    if (skip(n.name) || skip(n.config?.[EGRESS_FOR] ?? "")) {
      for (const a of (n.config?.["security.acls"] ?? "").split(",")) theirs.add(a);
      continue;
    }
    s[`network ${n.name}`] = n.description ?? "";
    for (const [k, v] of Object.entries(stableConfig(n.config))) s[`network ${n.name} ${k}`] = v;
  }
  for (
    const a of await list<Row & { ingress: unknown; egress: unknown }>(user, "/1.0/network-acls")
  ) {
    if (skip(a.name) || theirs.has(a.name)) continue;
    s[`acl ${a.name}`] = await digest({ config: a.config, ingress: a.ingress, egress: a.egress });
  }

  // the user's proxy: the pid its state directory records, that process, its listeners
  const home = Deno.env.get("HOME") ?? "/root";
  const state = `${Deno.env.get("XDG_STATE_HOME") || `${home}/.local/state`}/isx`;
  const config = `${Deno.env.get("XDG_CONFIG_HOME") || `${home}/.config`}/isx`;
  const pid = Number((await Deno.readTextFile(`${state}/proxy/proxy.pid`).catch(() => "")).trim());
  if (pid > 0) {
    s["proxy pid"] = processStamp(pid) ?? `${pid} (not running)`;
    s["proxy listen"] = listenersOf(await run("ss", ["-Hltnp"]), pid).join(" ");
  } else {
    s["proxy pid"] = "none";
  }

  for (const line of (await run("nft", ["list", "tables"])).split("\n")) {
    const m = /^table (\S+) (\S+)$/.exec(line.trim());
    if (!m || skip(m[2]!)) continue;
    const [family, name] = [m[1]!, m[2]!];
    s[`nft table ${family} ${name}`] = name.startsWith("isx_") && !name.startsWith("isx_guard")
      ? await digest(await run("nft", ["list", "table", family, name]))
      : "present";
  }

  for (const [dir, label] of [[config, "config/isx"], [`${state}/ca`, "state/isx/ca"]] as const) {
    for (const f of files(dir)) {
      s[`home ${label}${f}`] = await digest(await Deno.readTextFile(`${dir}${f}`).catch(() => ""));
    }
  }
  for (const k of SYSCTLS) {
    const v = await Deno.readTextFile(`/proc/sys/${k}`).catch(() => undefined);
    if (v !== undefined) s[`sysctl ${k.replaceAll("/", ".")}`] = v.trim();
  }
  return s;
}

/**
 * The suite's things Incus and nft hold now: `label` → the name that says whose it is (its
 * own name, or for an isb egress bridge the `<project>/<instance>` it serves).
 */
async function suites(incus: IncusClient): Promise<Map<string, string>> {
  const user = incus.withProject("default");
  const out = new Map<string, string>();
  for (const p of await list<Row>(user, "/1.0/projects")) out.set(`project ${p.name}`, p.name);
  const egressAcls = new Map<string, string>();
  for (const n of await list<Row>(user, "/1.0/networks")) {
    const owner = n.config?.[EGRESS_FOR];
    const whose = owner && isLabName(owner) ? owner : n.name;
    out.set(`network ${n.name}`, whose);
    for (const a of (n.config?.["security.acls"] ?? "").split(",")) egressAcls.set(a, whose);
  }
  for (const a of await list<Row>(user, "/1.0/network-acls")) {
    out.set(`acl ${a.name}`, egressAcls.get(a.name) ?? a.name);
  }
  for (const l of (await run("nft", ["list", "tables"])).split("\n")) {
    const name = l.trim().split(" ").at(-1);
    if (name) out.set(`nft ${l.trim()}`, name);
  }
  for (const [k, v] of out) if (!v.includes(LAB_PREFIX)) out.delete(k);
  return out;
}

/** What the suite made and left behind (not of a lab whose run still goes on). */
async function leftovers(incus: IncusClient, before: Snapshot): Promise<string[]> {
  const live = (await listLabs(incus)).filter((l) => ownerAlive(l.owner)).map((l) => l.lab.id);
  return [...(await suites(incus))].filter(([label, whose]) =>
    !live.some((id) => whose.includes(id)) && before[`made ${label}`] === undefined
  ).map(([label, whose]) => whose === label.split(" ").at(-1) ? label : `${label} (for ${whose})`);
}

/** What of the suite's was there already before the run (not this run's to answer for). */
async function made(incus: IncusClient): Promise<Snapshot> {
  return Object.fromEntries([...(await suites(incus)).keys()].map((k) => [`made ${k}`, ""]));
}

if (import.meta.main) {
  const { positionals, values } = parseArgs({
    args: Deno.args,
    allowPositionals: true,
    options: { "owner-pid": { type: "string" }, lab: { type: "string" } },
  });
  const [cmd, file] = positionals;
  if ((cmd !== "begin" && cmd !== "end") || !file) {
    console.error("usage: user_side.ts begin FILE [--owner-pid PID] | end FILE --lab ID");
    Deno.exit(2);
  }
  const incus = createIncusClient({ socket: SOCKET, timeouts: { requestMs: 120_000 } });
  try {
    if (cmd === "begin") {
      const swept = await sweepLabs(incus);
      if (swept.length) {
        console.error(`user_side: removed labs of runs that ended: ${swept.join(", ")}`);
      }
      const before = await snapshot(incus);
      await Deno.writeTextFile(file, JSON.stringify({ ...before, ...await made(incus) }, null, 1));
      const owner = values["owner-pid"] ? processStamp(Number(values["owner-pid"])) : undefined;
      const id = newLabId();
      await createLab(incus, id, owner);
      console.log(id);
      console.error(
        `user_side: ${
          Object.keys(before).length
        } things of the user's recorded; the suite's lab is ${labNames(id).project}`,
      );
    } else {
      if (!values.lab) throw new Error("end needs --lab ID");
      await removeLab(incus, labNames(values.lab));
      await sweepLabs(incus);
      const saved = JSON.parse(await Deno.readTextFile(file)) as Snapshot;
      const https = (await incus.serverInfo()).config?.["core.https_address"];
      if (saved["server core.https_address"] === undefined && https) {
        // the remote tests set it (never moved while they run); the run is over now
        await incus.call("PATCH", "/1.0", { body: { config: { "core.https_address": "" } } });
        console.error(
          `user_side: core.https_address ${https} (set for the remote tests) unset again`,
        );
      }
      const before = Object.fromEntries(
        Object.entries(saved).filter(([k]) => !k.startsWith("made ")),
      );
      const changes: Change[] = diffSnapshots(before, await snapshot(incus));
      const left = await leftovers(incus, saved);
      if (changes.length || left.length) {
        console.error("user_side: FAILED: the suite changed the user's side of this machine:");
        if (changes.length) console.error(formatChanges(changes));
        for (const l of left) console.error(`  left     ${l} (the suite's, still there)`);
        Deno.exitCode = 1;
      } else {
        console.error(
          `user_side: ok: the user's side is as the suite found it (${
            Object.keys(before).length
          } things)`,
        );
      }
    }
  } finally {
    incus.close();
  }
}
