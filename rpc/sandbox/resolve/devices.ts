/**
 * The devices a spec asks for (isb-rpc.md §8.2): deterministic names from guest paths and
 * listen addresses, disk devices for bind mounts (sources canonicalised through the injected
 * `realPath`, then translated for an incusd that sees another mount view) and named volumes
 * (pool rule, `initial.copy`, the volumes to ensure, owner fixups), and proxy devices for
 * ports. Pure: the filesystem is reached only through `HostFacts.realPath`.
 *
 * @module
 */

import { invalid, IsbError } from "../../errors.ts";
import type { NamedVolumeSpec } from "../spec/spec.ts";
// the helpers' own modules, not mounts.ts and ports.ts: those build the spec's schemas
import { normalizeAddr, splitAddr } from "../spec/addr.ts";
import type { MountSpec } from "../spec/mounts.ts";
import type { PortSpec } from "../spec/ports.ts";
import { normalTarget } from "../spec/target.ts";
import type { HostFacts } from "./host.ts";
import { absoluteHostPath, checkHostPath, protectedHostPaths } from "../../host_paths.ts";
import { type DeviceCheckContext, hostSocket, refuseRawProps } from "./_raw_rules.ts";
import { pickPool } from "./host.ts";

/** A desired device: props, and for a searched port how far it may move. */
export interface DesiredDevice {
  /** The Incus device's properties. */
  props: Record<string, string>;
  /** For a searched port: how many ports above the written one it may take. */
  search?: number;
}

/** A named volume that must exist before the instance. */
export interface EnsureVolume {
  /** The storage pool. */
  pool: string;
  /** The volume's name in Incus. */
  name: string;
  /** Config of a volume created here. */
  config: Record<string, string>;
  /** `external`: must exist already; never created. */
  external: boolean;
}

/** chown a mount point (and root-owned parents inside the owner's home). */
export interface OwnerFixup {
  /** The disk device of the mount. */
  device: string;
  /** The mount point in the guest. */
  path: string;
  /** The owner to give it (a name or id). */
  owner: string;
}

/** FNV-1a 32-bit of the UTF-8 bytes of `s`. */
export function fnv1a32(s: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * Deterministic device name for a guest path: lowercase, runs of non-`[a-z0-9]` → `-`,
 * trimmed; empty → `mount`; over 48 chars → last 39 (leading `-` trimmed) + `-` + FNV-1a-32.
 */
export function deviceNameForPath(guest: string): string {
  const s = guest.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "mount";
  if (s.length <= 48) return s;
  const tail = s.slice(s.length - 39).replace(/^-+/, "");
  return `${tail}-${fnv1a32(guest).toString(16).padStart(8, "0")}`;
}

/** The default proxy device name: `port-<bind>-<port>`, `-udp-` for udp, path-derived for unix. */
export function defaultPortName(bind: string, listen: string): string {
  const a = splitAddr(listen);
  if (a && a[0] === "tcp") return `port-${bind}-${a[2]}`;
  if (a) return `port-${bind}-${a[0]}-${a[2]}`;
  return `port-${bind}-${deviceNameForPath(listen)}`;
}

/**
 * A bind source made absolute and canonical by the one check of `rpc/host_paths.ts` (`~`, `$HOME`,
 * relative to `baseDir`, symlinks resolved; refused in, through a link to, or holding a
 * protected path); it must exist. Then the host path map applies.
 */
export function canonicalBindSource(
  source: string,
  opts: { baseDir: string; host: HostFacts; key?: string },
): string {
  const c = hostPathContext(opts);
  const canon = checkHostPath(opts.key ?? "bind source", source, c);
  if (opts.host.realPath(canon) === undefined) {
    throw invalid(`bind source ${absoluteHostPath(source, c)} does not exist`);
  }
  return translateHostPath(canon, opts.host);
}

/** The canonical check's context for a resolution (roots: the host's, else the defaults). */
export function hostPathContext(opts: { baseDir: string; host: HostFacts }): DeviceCheckContext {
  const { host } = opts;
  return {
    home: host.home,
    baseDir: opts.baseDir,
    realPath: (p) => host.realPath(p),
    roots: host.protectedPaths ?? protectedHostPaths({ env: { HOME: host.home } }),
    translate: (p) => translateHostPath(p, host),
  };
}

/** `ISB_HOST_PATH_MAP=FROM=TO` (or `$HOME` → `/etc/workspace/guest-home`) at a path boundary. */
export function translateHostPath(path: string, host: HostFacts): string {
  let map: [string, string] | undefined;
  if (host.hostPathMap !== undefined) {
    const eq = host.hostPathMap.indexOf("=");
    const from = eq < 0 ? "" : host.hostPathMap.slice(0, eq).replace(/\/+$/, "");
    const to = eq < 0 ? "" : host.hostPathMap.slice(eq + 1).replace(/\/+$/, "");
    if (from !== "" && to !== "") map = [from, to];
  } else if (host.guestHome) {
    const gh = host.guestHome.trim().replace(/\/+$/, "");
    const home = host.home.replace(/\/+$/, "");
    if (gh !== "" && home !== "") map = [home, gh];
  }
  if (map && path.startsWith(map[0])) {
    const rest = path.slice(map[0].length);
    if (rest === "" || rest.startsWith("/")) return `${map[1]}${rest}`;
  }
  return path;
}

/** What the mounts of a spec produce. */
export interface MountDevices {
  devices: [string, DesiredDevice][];
  volumes: EnsureVolume[];
  owners: OwnerFixup[];
  /** Whether any mount is a host path (a VM then needs id translation). */
  binds: boolean;
}

/** Resolves mounts into disk devices, volumes to ensure and owner fixups. */
export function mountDevices(
  mounts: MountSpec[],
  opts: {
    name: string;
    pool: string;
    vm: boolean;
    baseDir: string;
    host: HostFacts;
    volumeDefs: Record<string, NamedVolumeSpec>;
  },
): MountDevices {
  const { name, host } = opts;
  const out: MountDevices = { devices: [], volumes: [], owners: [], binds: false };
  const seen = new Set<string>();
  const initialCopy = host.apiExtensions.includes("disk_initial_copy");
  for (const [i, m] of mounts.entries()) {
    const guest = m.target;
    if (!guest.startsWith("/")) {
      throw invalid(`${name}: mount path ${JSON.stringify(guest)} must be absolute`);
    }
    const path = normalTarget(guest);
    if (seen.has(path)) throw invalid(`${name}: ${guest} is mounted twice`);
    seen.add(path);
    const dname = m.device ?? deviceNameForPath(path);
    const props: Record<string, string> = { type: "disk", path };
    if (m.type === "bind") {
      if (m.owner !== undefined) {
        throw invalid(
          `${name}: ${guest}: owner is only for named volumes (isb never chowns host paths)`,
        );
      }
      if (m.pool !== undefined || m.external || m.volume?.nocopy) {
        throw invalid(`${name}: ${guest}: pool, external and nocopy are only for named volumes`);
      }
      props.source = canonicalBindSource(m.source, {
        ...opts,
        key: `${name}: volumes[${i}].source`,
      });
      out.binds = true;
    } else {
      if (m.source.includes("/")) {
        throw new IsbError(
          "invalid",
          `${name}: volumes[${i}].source: ${JSON.stringify(m.source)} is not a volume name ` +
            "(a host path starts with /, ., ~ or $HOME)",
          { data: { key: `volumes[${i}].source`, path: m.source } },
        );
      }
      const def = opts.volumeDefs[m.source];
      const vname = def?.name || m.source;
      const requested = m.pool ?? def?.pool;
      const vpool = requested !== undefined && requested !== "auto" && requested !== ""
        ? pickPool(host, requested)
        : opts.pool;
      props.pool = vpool;
      props.source = vname;
      if (!opts.vm && initialCopy && !m.volume?.nocopy) props["initial.copy"] = "true";
      const ev: EnsureVolume = {
        pool: vpool,
        name: vname,
        config: def?.config ?? {},
        external: Boolean(m.external || def?.external),
      };
      if (
        !out.volumes.some((v) =>
          v.pool === ev.pool && v.name === ev.name && v.external === ev.external
        )
      ) {
        out.volumes.push(ev);
      }
      if (m.owner !== undefined) out.owners.push({ device: dname, path, owner: m.owner });
    }
    if (m.read_only) props.readonly = "true";
    for (const k of Object.keys(m.options ?? {})) {
      if (["type", "path", "source", "pool", "readonly"].includes(k)) {
        throw invalid(
          `${name}: ${guest}: options.${k} would override a core property; use the field instead`,
        );
      }
    }
    refuseRawProps(`${name}: ${guest}: options`, m.options ?? {});
    Object.assign(props, m.options ?? {});
    out.devices.push([dname, { props }]);
  }
  return out;
}

/**
 * Resolves one port into its device name and device (`sandbox.add_port` uses it alone): the
 * listen host defaults to 127.0.0.1, the connect host to 127.0.0.1 (VM: 0.0.0.0, with
 * `nat: "true"`).
 */
export function portDevice(
  p: PortSpec,
  opts: { name: string; vm: boolean; paths: DeviceCheckContext },
): [string, DesiredDevice] {
  const { name, vm } = opts;
  if (vm && p.bind === "guest") {
    throw invalid(`${name}: incus VMs only support bind: host proxies (in NAT mode)`);
  }
  const connectHost = vm ? "0.0.0.0" : "127.0.0.1";
  const wrap = (what: string, addr: string, host: string) => {
    try {
      return normalizeAddr(addr, host);
    } catch (e) {
      throw invalid(`${name}: port ${what}: ${(e as Error).message}`);
    }
  };
  const listen = wrap("listen", p.listen, "127.0.0.1");
  const connect = wrap("connect", p.connect, connectHost);
  if (p.search !== undefined) {
    const c = splitAddr(connect);
    if (!c || c[1] !== connectHost) {
      throw invalid(
        `${name}: a published port range connects to the guest's default address (${connectHost}), not ${connect}`,
      );
    }
    if (p.bind !== "host") throw invalid(`${name}: port search only applies to bind: host`);
    if (!splitAddr(listen)) {
      throw invalid(`${name}: port search needs a single tcp or udp listen port`);
    }
  }
  const props: Record<string, string> = { type: "proxy", bind: p.bind, listen, connect };
  const side = p.bind === "guest" ? "connect" : "listen"; // the host's end
  if (props[side]!.startsWith("unix:")) {
    const key = `${name}: port ${side}`;
    props[side] = `unix:${hostSocket(key, props[side]!.slice(5), opts.paths)}`;
  }
  if (vm) props.nat = "true";
  refuseRawProps(`${name}: port options`, p.options);
  for (const [k, v] of Object.entries(p.options)) {
    if (["type", "bind", "listen", "connect"].includes(k)) {
      throw invalid(
        `${name}: port options.${k} would override a core property; use the field instead`,
      );
    }
    props[k] = v;
  }
  const dev: DesiredDevice = { props };
  if (p.search) dev.search = p.search;
  return [p.name ?? defaultPortName(p.bind, listen), dev];
}
