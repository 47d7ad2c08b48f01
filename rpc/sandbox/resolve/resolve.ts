/**
 * Resolution: a parsed spec plus the host's facts → {@link Desired}, exactly what incus should
 * hold (isb-rpc.md §6.6, §8). Pure: host facts (pools, api extensions, subuid/subgid, the
 * filesystem through `realPath`) are passed in, which is what makes the rules table-testable.
 *
 * Order matters for the SDKs (§5.2): params are parsed first (spec.ts), host facts are
 * gathered from incusd second (so a dead incusd is `connect`), and only then does this module
 * judge semantics: name, image prefix, pools, bind sources, cpus/cpuset/mem, VM rules.
 *
 * Secret values never reach `desiredToJson`'s output (`_desired.ts`): environment secrets
 * resolved for an OCI image are config keys listed in `sensitive`, those for a system image
 * exec environment listed in `sensitiveExec`, and both render as `(secret)`.
 *
 * @module
 */

import { invalid, IsbError } from "../../errors.ts";
import { parseDuration } from "../../duration.ts";
import { type EgressPlan, egressPlan } from "../egress/names.ts";
import type { NamedVolumeSpec, SandboxSpec } from "../spec/spec.ts";
import type { ExecDefaults } from "../spec/parts.ts";
import { type DesiredDevice, hostPathContext, mountDevices, portDevice } from "./devices.ts";
import { checkDeviceProps, checkIdmapValue, checkRawConfig } from "./_raw_rules.ts";
import { containerIdmap, type HostFacts, pickPool, vmIdmap } from "./host.ts";
import { isOci, parseImage } from "./image.ts";
import { memoryLimit, ociCommandLine } from "./config.ts";
import { type Desired, sortKeys } from "./_desired.ts";

export type { DesiredDevice, EnsureVolume, ImageSource, OwnerFixup } from "./_desired.ts";
export { type Desired, desiredToJson, REDACTED } from "./_desired.ts";
export type { HostFacts };

/** What {@link resolve} needs besides the spec. */
export interface ResolveOptions {
  /** The host's facts, gathered before (`host_facts.ts`). */
  host: HostFacts;
  /** Anchors relative bind sources (absolute; the server's cwd by default). */
  baseDir: string;
  /** Named-volume definitions (a compose file's top-level `volumes:`). */
  volumeDefs?: Record<string, NamedVolumeSpec>;
  /** The incus project (`""` = `default`); egress names derive from it. */
  project?: string;
  /** Values of top-level secrets used as `environment: {K: {secret: S}}`, by secret name. */
  secretValues?: Record<string, string>;
}

/** Whether `name` is a valid instance name: ≤63 `[A-Za-z0-9-]`, a letter first, no `-` last. */
export function validInstanceName(name: string): boolean {
  return /^[A-Za-z][A-Za-z0-9-]{0,62}$/.test(name) && !name.endsWith("-");
}

/** Resolves a spec. Throws `invalid` with the spec's texts. */
export function resolve(spec: SandboxSpec, opts: ResolveOptions): Desired {
  const { host } = opts;
  const name = spec.container_name;
  if (name === undefined || name === "") throw invalid("sandbox name is required");
  if (!validInstanceName(name)) {
    throw invalid(
      `invalid sandbox name ${
        JSON.stringify(name)
      }: use at most 63 of [a-z0-9-], starting with a letter`,
    );
  }
  const image = withName(name, () => parseImage(spec.image));
  const project = opts.project === undefined || opts.project === "" ? "default" : opts.project;
  if (image.local_registry && !project.startsWith("isb-")) {
    throw invalid(
      `${name}: ${
        JSON.stringify(image.spec)
      }: registry: images belong to an org; this project is not one`,
    );
  }
  const pool = pickPool(host, spec.storage);
  const vm = spec.type === "virtual-machine";
  const oci = isOci(image);
  if (vm && host.serverDriver !== "" && !host.serverDriver.includes("qemu")) {
    throw invalid(
      `${name}: this incus server cannot run virtual machines (driver: ${host.serverDriver})`,
    );
  }
  if (oci && vm) throw invalid(`${name}: OCI images run as containers, not VMs`);
  if (spec.entrypoint && !oci) throw invalid(`${name}: entrypoint is for OCI images; use command`);
  if (vm && spec.privileged !== undefined) throw invalid(`${name}: privileged is container-only`);
  if (vm && (spec.ports ?? []).some((p) => p.bind === "guest")) {
    throw invalid(`${name}: incus VMs only support bind: host proxies (in NAT mode)`);
  }

  // host paths in the free-form parts: checked before anything else is built (_raw_rules.ts)
  const paths = hostPathContext({ baseDir: opts.baseDir, host });
  checkRawConfig(spec.raw_config ?? {}, `${name}: raw_config`);
  const idmapSpec = spec.idmap;
  if (typeof idmapSpec === "object" && "raw" in idmapSpec) {
    checkIdmapValue(`${name}: idmap.raw`, idmapSpec.raw);
  }
  const rawDevices: [string, Record<string, string>][] = [];
  for (const [d, props] of Object.entries(spec.raw_devices ?? {})) {
    if (d === "root") {
      if ("source" in props) {
        throw new IsbError(
          "invalid",
          `${name}: raw_devices.root.source: the root disk takes no source (it is the pool's)`,
          { data: { key: "raw_devices.root.source", path: props.source! } },
        );
      }
      const merged = { type: "disk", path: "/", pool, ...props };
      rawDevices.push([d, checkDeviceProps(`${name}: raw_devices.root`, merged, paths)]);
      continue;
    }
    if (!("type" in props)) throw invalid(`${name}: raw device ${JSON.stringify(d)} needs a type`);
    rawDevices.push([d, checkDeviceProps(`${name}: raw_devices.${d}`, props, paths)]);
  }

  const config: Record<string, string> = {};
  const sensitive: string[] = [];
  const exec: ExecDefaults = execDefaults(spec);
  const sensitiveExec: string[] = [];
  if (spec.cpus !== undefined && spec.cpuset !== undefined) {
    throw invalid(`${name}: set cpus (a count) or cpuset (which CPUs), not both`);
  }
  if (spec.cpus !== undefined) {
    const c = spec.cpus.trim();
    if (!/^[0-9]+$/.test(c) || Number(c) === 0 || Number(c) > 0xffffffff) {
      throw invalid(
        `${name}: cpus is a whole number of CPUs, got ${
          JSON.stringify(spec.cpus)
        } (pin CPUs with cpuset: "0-3")`,
      );
    }
    config["limits.cpu"] = String(Number(c));
  }
  if (spec.cpuset !== undefined) config["limits.cpu"] = spec.cpuset;
  if (spec.mem_limit !== undefined) {
    config["limits.memory"] = withName(name, () => memoryLimit(spec.mem_limit!), "mem_limit: ");
  }
  if (spec.privileged !== undefined) config["security.privileged"] = String(spec.privileged);

  const mounts = mountDevices(spec.volumes ?? [], {
    name,
    pool,
    vm,
    baseDir: opts.baseDir,
    host,
    volumeDefs: opts.volumeDefs ?? {},
  });
  const idmap = vm
    ? vmIdmap(spec.idmap, { name, user: spec.user, binds: mounts.binds, host })
    : containerIdmap(spec.idmap, host);
  if (idmap.raw !== undefined) config["raw.idmap"] = idmap.raw;
  for (const [k, v] of Object.entries(spec.labels ?? {})) {
    if (k === "" || /\s/.test(k)) throw invalid(`${name}: invalid label key ${JSON.stringify(k)}`);
    config[`user.${k}`] = v;
  }
  for (const [k, v] of Object.entries(spec.environment ?? {})) {
    if (typeof v === "string") {
      config[`environment.${k}`] = v;
      continue;
    }
    const value = opts.secretValues?.[v.secret];
    if (value === undefined) continue;
    if (oci) {
      config[`environment.${k}`] = value;
      sensitive.push(`environment.${k}`);
    } else {
      exec.env = { ...exec.env, [k]: value };
      sensitiveExec.push(k);
    }
  }
  const restart = spec.restart;
  if (restart === "always" || restart === "on-failure") config["boot.autostart"] = "true";
  if (restart !== undefined && restart !== "no") config["boot.autorestart"] = "true";
  if (oci) ociConfig(spec, name, config);
  Object.assign(config, spec.raw_config ?? {});

  const devices: Record<string, DesiredDevice> = {};
  const add = (dname: string, dev: DesiredDevice) => {
    if (dname in devices) {
      throw invalid(`${name}: device name ${JSON.stringify(dname)} is used twice`);
    }
    devices[dname] = dev;
  };
  add("root", { props: { type: "disk", path: "/", pool } });
  for (const [d, dev] of mounts.devices) add(d, dev);
  for (const p of spec.ports ?? []) add(...portDevice(p, { name, vm, paths }));
  let egress: EgressPlan | undefined;
  if (spec.egress !== undefined) {
    egress = withName(name, () => egressPlan(spec.egress!, project, name));
    add("eth0", { props: egress.nic });
    Object.assign(config, egress.config);
  }
  for (const [d, props] of rawDevices) {
    if (d === "root") Object.assign(devices.root!.props, props);
    else add(d, { props });
  }

  const readyTimeoutMs = spec.ready_timeout !== undefined
    ? withName(name, () => parseDuration(spec.ready_timeout!))
    : vm
    ? 300_000
    : 60_000;
  const out: Desired = {
    name,
    instance_type: vm ? "virtual-machine" : "container",
    image,
    pool,
    profiles: spec.incus_profiles ?? ["default"],
    config,
    devices: sortKeys(devices),
    volumes: mounts.volumes,
    owners: mounts.owners,
    ready: spec.ready ?? (vm ? ["running", "agent"] : ["running"]),
    exec,
    readyTimeoutMs,
    sensitive,
    sensitiveExec,
  };
  if (idmap.mode !== undefined) out.idmapMode = idmap.mode;
  if (egress) out.egress = egress;
  return out;
}

/** Exec defaults a spec implies: `user`, `working_dir`, `exec.env`, `exec.login`. */
export function execDefaults(spec: SandboxSpec): ExecDefaults {
  const out: ExecDefaults = {};
  if (spec.user !== undefined) out.user = spec.user;
  if (spec.working_dir !== undefined) out.cwd = spec.working_dir;
  if (spec.exec?.env) out.env = { ...spec.exec.env };
  if (spec.exec?.login) out.login = true;
  return out;
}

function ociConfig(spec: SandboxSpec, name: string, config: Record<string, string>): void {
  const line = [...(spec.entrypoint ?? []), ...(spec.command ?? [])];
  if (line.length > 0) config["oci.entrypoint"] = withName(name, () => ociCommandLine(line));
  if (spec.working_dir !== undefined) config["oci.cwd"] = spec.working_dir;
  if (spec.user !== undefined) {
    const u = spec.user;
    const [uid, gid = uid] = u.split(":", 2) as [string, string?];
    if (!/^[0-9]+$/.test(uid) || !/^[0-9]+$/.test(gid)) {
      throw invalid(
        `${name}: an OCI image's user must be numeric (uid or uid:gid), got ${JSON.stringify(u)}`,
      );
    }
    config["oci.uid"] = uid;
    config["oci.gid"] = gid;
  }
}

/** Runs `f`, prefixing an `invalid` message with `<name>: `. */
function withName<T>(name: string, f: () => T, what = ""): T {
  try {
    return f();
  } catch (e) {
    throw invalid(`${name}: ${what}${(e as Error).message}`);
  }
}
