/**
 * The host facts resolution depends on, and the rules that read them: the storage pool rule
 * (`auto`: `incus-zfs`, else `default`, else the first pool) and the idmap decision
 * (isb-rpc.md §8.3). The I/O side gathers {@link HostFacts} once per request (after the
 * incusd round trip that decides `connect` errors); everything here is pure.
 *
 * @module
 */

import { invalid } from "../../errors.ts";
import type { IdmapMode, IdmapSpec } from "../spec/parts.ts";

/** Facts about the host and its incusd that resolution needs. */
export interface HostFacts {
  /** Storage pools in server order (`GET /1.0/storage-pools?recursion=1`). */
  pools: { name: string; driver: string }[];
  /** `api_extensions` of `GET /1.0` (`disk_initial_copy` enables `initial.copy`). */
  apiExtensions: string[];
  /** `environment.driver` of `GET /1.0` (`lxc`, `lxc | qemu`): no `qemu` → no VMs. */
  serverDriver: string;
  /** `environment.server_version` of `GET /1.0`, for the VM host-mount rule. */
  serverVersion?: string;
  /** The server process's `$HOME` (expands `~` in bind sources). */
  home: string;
  /** The invoking user's uid (what a VM's host mounts map from). */
  uid: number;
  /** The invoking user's gid. */
  gid: number;
  /** Contents of `/etc/subuid` (undefined when missing). */
  subuid: string | undefined;
  /** Contents of `/etc/subgid` (undefined when missing). */
  subgid: string | undefined;
  /** Bind sources are owned by whoever asks (macOS, `ISB_BIND_CALLER_OWNED=1`): auto maps nothing. */
  callerOwned?: boolean;
  /** `ISB_HOST_PATH_MAP` (`FROM=TO`), when set. */
  hostPathMap: string | undefined;
  /** Contents of `/etc/workspace/guest-home`, when present (maps `$HOME` for incusd). */
  guestHome?: string | undefined;
  /** Canonical path (symlinks resolved) of an existing path; undefined when it is missing. */
  realPath(path: string): string | undefined;
  /** Paths no bind source may be or lie under (rpc/host_paths.ts). */
  protectedPaths?: readonly string[];
}

/** The pool a request means: a named pool must exist; `auto`/"" picks one. Throws `invalid`. */
export function pickPool(host: HostFacts, requested?: string): string {
  const names = host.pools.map((p) => p.name);
  if (requested !== undefined && requested !== "" && requested !== "auto") {
    if (names.length === 0 || names.includes(requested)) return requested;
    throw invalid(
      `storage pool ${JSON.stringify(requested)} does not exist (have: ${names.join(", ")})`,
    );
  }
  const pick = ["incus-zfs", "default"].find((c) => names.includes(c)) ?? names[0];
  if (pick === undefined) throw invalid("no storage pools exist");
  return pick;
}

/**
 * Whether `id` lies in a subordinate id RANGE (count > 1) owned by `root` or `0` in subuid
 * or subgid content; a `root:1000:1` delegation line is not a range.
 */
export function inSubidRange(content: string | undefined, id: number): boolean {
  return (content ?? "").split("\n").some((line) => {
    const [who, start, count] = line.trim().split(":");
    if (who !== "root" && who !== "0") return false;
    if (!/^\s*[0-9]+\s*$/.test(start ?? "") || !/^\s*[0-9]+\s*$/.test(count ?? "")) return false;
    const s = Number(start);
    const c = Number(count);
    return c > 1 && id >= s && id < s + c;
  });
}

function render(
  uid: [number, number] | undefined,
  gid: [number, number] | undefined,
): string | undefined {
  if (!uid && !gid) return undefined;
  if (uid && gid && uid[0] === gid[0] && uid[1] === gid[1]) return `both ${uid[0]} ${uid[1]}`;
  const lines: string[] = [];
  if (uid) lines.push(`uid ${uid[0]} ${uid[1]}`);
  if (gid) lines.push(`gid ${gid[0]} ${gid[1]}`);
  return lines.join("\n");
}

/** A container's `raw.idmap` for its spec on this host, and the mode the spec chose. */
export function containerIdmap(
  spec: IdmapSpec | undefined,
  host: HostFacts,
): { mode?: IdmapMode; raw?: string } {
  if (spec === undefined) return {};
  if (typeof spec === "object" && "raw" in spec) return { raw: spec.raw };
  const m = typeof spec === "string"
    ? { mode: spec, host_uid: 1000, host_gid: 1000, guest_uid: 1000, guest_gid: 1000 }
    : spec;
  const out: { mode?: IdmapMode; raw?: string } = { mode: m.mode };
  let needUid = true;
  let needGid = true;
  if (m.mode === "none" || (m.mode === "auto" && host.callerOwned)) return out;
  if (m.mode === "auto") {
    needUid = !inSubidRange(host.subuid, m.host_uid);
    needGid = !inSubidRange(host.subgid, m.host_gid);
  }
  const raw = render(
    needUid ? [m.host_uid, m.guest_uid] : undefined,
    needGid ? [m.host_gid, m.guest_gid] : undefined,
  );
  if (raw !== undefined) out.raw = raw;
  return out;
}

function versionAtLeast(v: string | undefined, major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(v ?? "");
  if (!m) return false;
  return Number(m[1]) > major || (Number(m[1]) === major && Number(m[2]) >= minor);
}

/**
 * A VM's `raw.idmap`: only when it has host mounts, mapping the invoking uid/gid to the
 * service user's ids (unset/`root` → 0:0, numeric `U[:G]` as given, a name → 1000:1000);
 * needs incus ≥ 7.5 (virtiofsd id translation). Explicit modes other than auto/none refused.
 */
export function vmIdmap(
  spec: IdmapSpec | undefined,
  opts: { name: string; user: string | undefined; binds: boolean; host: HostFacts },
): { mode?: IdmapMode; raw?: string } {
  const { name, host } = opts;
  const mode = typeof spec === "string" ? spec : spec && "mode" in spec ? spec.mode : undefined;
  if (spec !== undefined && typeof spec === "object" && "raw" in spec) {
    throw invalid(`${name}: idmap is container-only; a VM maps ids only for its host mounts`);
  }
  if (mode === "always") {
    throw invalid(`${name}: idmap is container-only; a VM maps ids only for its host mounts`);
  }
  const out: { mode?: IdmapMode; raw?: string } = mode ? { mode } : {};
  if (!opts.binds || mode === "none") return out;
  if (!versionAtLeast(host.serverVersion, 7, 5)) {
    throw invalid(
      `${name}: host paths in a VM need incus 7.5 or later for id translation ` +
        `(this server runs ${host.serverVersion ?? "an unknown version"})`,
    );
  }
  const u = opts.user ?? "root";
  let guest: [number, number] = [1000, 1000];
  if (u === "root") guest = [0, 0];
  else if (/^[0-9]+(:[0-9]+)?$/.test(u)) {
    const [a, b] = u.split(":");
    guest = [Number(a), Number(b ?? a)];
  }
  const raw = render([host.uid, guest[0]], [host.gid, guest[1]]);
  if (raw !== undefined) out.raw = raw;
  return out;
}
