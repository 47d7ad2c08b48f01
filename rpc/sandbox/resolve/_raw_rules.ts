/**
 * What the free-form parts of a spec may say (isb-rpc.md §6.6 `raw_config`, `raw_devices`;
 * docs/rpc_sandbox.md, "Host paths"). They are passed to Incus nearly verbatim, so they are
 * where a host path slips past the typed fields: a `disk` device whose `source` is `~/.ssh`,
 * a `raw.lxc` mount entry or hook, a proxy device connecting to the Incus socket, a block
 * device of the host's disk. Each such path goes through the one canonical check of
 * `rpc/host_paths.ts`; what cannot be checked is refused.
 *
 * - `raw.*` config keys: refused, except `raw.idmap` whose lines have the idmap grammar
 *   (`uid|gid|both HOST[-HOST] GUEST[-GUEST]`), which cannot name a path. `raw.lxc` (mount
 *   entries, hooks, includes), `raw.apparmor`, `raw.seccomp`, `raw.qemu*` can.
 * - device types: an allow-list; `unix-block` (a host disk holds every file) and `pci` are
 *   refused, as is any prop key under `raw.` or `ceph.`.
 * - `disk`: without `pool`, `source` is a host path (checked, then the canonical path is what
 *   Incus gets); with `pool`, a volume name (no `/` first, no `..`, no `~`); `ceph:`/`cephfs:`
 *   sources are refused.
 * - `unix-char`: the host node (`source`, else `path`) must be one of {@link CHAR_DEVICES}.
 * - `proxy`: the host side (`listen`, or `connect` with `bind: guest`) as `unix:PATH` is a
 *   host path (checked as a file); an abstract socket (`unix:@…`) there is refused.
 *
 * Pure.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import { checkHostPath, type HostPathContext } from "../../host_paths.ts";

/** Device types a spec may add. */
export const DEVICE_TYPES: readonly string[] = [
  "disk",
  "nic",
  "proxy",
  "unix-char",
  "unix-hotplug",
  "gpu",
  "usb",
  "tpm",
  "infiniband",
  "none",
];

/** Character devices a `unix-char` device may pass (by their fixed path under `/dev`). */
export const CHAR_DEVICES: readonly string[] = [
  "/dev/fuse",
  "/dev/net/tun",
  "/dev/kvm",
  "/dev/vhost-net",
  "/dev/vhost-vsock",
  "/dev/null",
  "/dev/zero",
  "/dev/full",
  "/dev/random",
  "/dev/urandom",
];

const IDMAP_LINE = /^(uid|gid|both)[ \t]+[0-9]+(-[0-9]+)?[ \t]+[0-9]+(-[0-9]+)?$/;

function refuse(key: string, message: string, data: Record<string, string> = {}): never {
  throw new IsbError("invalid", `${key}: ${message}`, { data: { key, ...data } });
}

/** Throws `invalid` unless `value` is `raw.idmap` lines in the idmap grammar. */
export function checkIdmapValue(key: string, value: string): void {
  for (const line of value.split("\n").map((l) => l.trim()).filter((l) => l !== "")) {
    if (!IDMAP_LINE.test(line)) {
      refuse(
        key,
        `${JSON.stringify(line)} is not an idmap line (uid|gid|both HOST[-HOST] GUEST[-GUEST])`,
      );
    }
  }
}

/** Throws `invalid` for a `raw.*` key other than a well-formed `raw.idmap`. */
export function checkRawConfig(config: Readonly<Record<string, string>>, what = "raw_config") {
  for (const [k, v] of Object.entries(config)) {
    if (!k.startsWith("raw.")) continue;
    if (k === "raw.idmap") {
      checkIdmapValue(`${what}.${k}`, v);
      continue;
    }
    refuse(
      `${what}.${k}`,
      `isb never passes ${k} to Incus: raw keys can mount host paths, run hooks on the host ` +
        "or lift confinement (only raw.idmap is allowed); use volumes, raw_devices or idmap",
    );
  }
}

/** Throws `invalid` for a device prop key under `raw.` or `ceph.` (not checkable here). */
export function refuseRawProps(key: string, props: Readonly<Record<string, string>>): void {
  for (const k of Object.keys(props)) {
    if (k.startsWith("raw.") || k.startsWith("ceph.")) {
      refuse(`${key}.${k}`, "isb never passes raw or ceph device keys to Incus");
    }
  }
}

/** What a device check needs: the canonical check's context and the host path map. */
export interface DeviceCheckContext extends HostPathContext {
  /** Translates a canonical host path for incusd (`ISB_HOST_PATH_MAP`, guest-home). */
  translate(path: string): string;
}

/**
 * A device's props with every host path checked and replaced by its canonical (translated)
 * form; `key` names the device in messages (`raw_devices.keys`). Throws `invalid`.
 */
export function checkDeviceProps(
  key: string,
  props: Readonly<Record<string, string>>,
  c: DeviceCheckContext,
): Record<string, string> {
  const out = { ...props };
  const type = out.type ?? "";
  refuseRawProps(key, out);
  if (!DEVICE_TYPES.includes(type)) {
    const why = type === "unix-block"
      ? "a block device of the host holds its file systems, ~/.ssh included"
      : `isb adds only ${DEVICE_TYPES.join(", ")} devices`;
    refuse(`${key}.type`, `${JSON.stringify(type)} is refused: ${why}`);
  }
  if (type === "disk") diskSource(key, out, c);
  if (type === "unix-char") {
    const node = out.source ?? out.path ?? "";
    if (!CHAR_DEVICES.includes(node)) {
      refuse(
        `${key}.${out.source !== undefined ? "source" : "path"}`,
        `host device ${JSON.stringify(node)} is not one isb passes (${CHAR_DEVICES.join(", ")})`,
        { path: node },
      );
    }
  }
  if (type === "proxy") {
    const side = out.bind === "guest" ? "connect" : "listen";
    const addr = out[side];
    if (addr !== undefined && addr.startsWith("unix:")) {
      out[side] = `unix:${hostSocket(`${key}.${side}`, addr.slice(5), c)}`;
    }
  }
  return out;
}

/** A proxy device's host-side unix socket path, checked; abstract sockets refused. */
export function hostSocket(key: string, path: string, c: DeviceCheckContext): string {
  if (path.startsWith("@")) {
    refuse(key, `an abstract socket on the host (${JSON.stringify(path)}) is refused`, { path });
  }
  return c.translate(checkHostPath(key, path, { ...c, file: true }));
}

function diskSource(key: string, out: Record<string, string>, c: DeviceCheckContext): void {
  const source = out.source;
  if (source === undefined || source === "") return;
  if (out.pool !== undefined && out.pool !== "") {
    if (source.startsWith("/") || source.startsWith("~") || /(^|\/)\.\.(\/|$)/.test(source)) {
      refuse(
        `${key}.source`,
        `${JSON.stringify(source)} is not a volume name (with pool, source names a volume)`,
        { path: source },
      );
    }
    return;
  }
  if (source === "cloud-init:config" || source === "agent:config") return; // VM config drives
  if (/^(ceph|cephfs):/.test(source)) {
    refuse(`${key}.source`, "ceph sources are refused (they read the host's ceph keyrings)", {
      path: source,
    });
  }
  out.source = c.translate(checkHostPath(`${key}.source`, source, c));
}
