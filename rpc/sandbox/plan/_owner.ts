/**
 * Owner fixups of mount points (isb-rpc.md §9.4) and the guest user lookups they share with
 * readiness checks.
 *
 * Users and groups resolve against the image's own `/etc/passwd` and `/etc/group`, read
 * through the Incus file API (numeric ids need no entry). Stats come from the same API's
 * headers; the chown/chmod run as root through exec with an argv (never a shell string
 * built from a path or a name). After the mount point, each root-owned parent inside the
 * user's home is given to the user too (a bind or volume mount conjures them as root),
 * stopping at the home, `/`, or the first parent root does not own.
 *
 * @module
 */

import { IsbError, isNotFound } from "../../errors.ts";
import type { IncusClient } from "../../incus/mod.ts";

/** Resolved ids of a guest user. */
export interface GuestIds {
  uid: number;
  gid: number;
  /** The passwd entry's home, when there is an entry. */
  home?: string;
  /** The passwd entry's name and shell, when there is an entry. */
  user?: string;
  shell?: string;
}

/** The mode Incus gives the root of a new, unseeded volume. */
export const FRESH_MODE = 0o711;

/** `USER[:GROUP]` split at the first colon. */
function split(owner: string): [string, string | undefined] {
  const i = owner.indexOf(":");
  return i < 0 ? [owner, undefined] : [owner.slice(0, i), owner.slice(i + 1)];
}

const isId = (s: string) => /^\d+$/.test(s);

/** `getent`'s answer from the files' text; a failure is a message (no such user/group). */
export function resolveIn(owner: string, passwd: string, group: string): GuestIds | string {
  const [user, grp] = split(owner);
  const entry = passwd.split("\n").map((l) => l.split(":")).find((f) =>
    f.length >= 6 && (f[0] === user || (isId(user) && f[2] === user))
  );
  let ids: GuestIds;
  if (entry) {
    const uid = Number(entry[2]), gid = Number(entry[3]);
    if (!isId(entry[2]!) || !isId(entry[3]!)) return `bad ids for ${user} in /etc/passwd`;
    ids = { uid, gid, home: entry[5]!, user: entry[0]!, shell: entry[6] ?? "" };
  } else if (isId(user)) {
    ids = { uid: Number(user), gid: Number(user) };
  } else {
    return `no such user in the image's /etc/passwd: ${user}`;
  }
  if (grp !== undefined && grp !== "") {
    if (isId(grp)) ids.gid = Number(grp);
    else {
      const g = group.split("\n").map((l) => l.split(":")).find((f) =>
        f.length >= 3 && f[0] === grp && isId(f[2]!)
      );
      if (!g) return `no such group in the image's /etc/group: ${grp}`;
      ids.gid = Number(g[2]);
    }
  }
  return ids;
}

/** Reads a text file from the guest; a missing file is empty. */
export async function readGuestText(incus: IncusClient, name: string, path: string) {
  try {
    return new TextDecoder().decode((await incus.pullFile(name, path)).data);
  } catch (e) {
    if (isNotFound(e)) return "";
    throw e;
  }
}

/** Resolves `USER[:GROUP]` (names or ids) in the guest; failure is a message. */
export async function resolveGuestIds(
  incus: IncusClient,
  name: string,
  owner: string,
): Promise<GuestIds | string> {
  const [, grp] = split(owner);
  const passwd = await readGuestText(incus, name, "/etc/passwd");
  const group = grp !== undefined && !isId(grp) && grp !== ""
    ? await readGuestText(incus, name, "/etc/group")
    : "";
  return resolveIn(owner, passwd, group);
}

/** The parent directory of an absolute path. */
export function parentDir(p: string): string {
  const t = p.replace(/\/+$/, "");
  const i = t.lastIndexOf("/");
  return i <= 0 ? "/" : t.slice(0, i);
}

/** One fixup, as the plan's `fix_owner` action carries it. */
export interface OwnerFix {
  path: string;
  owner?: string | undefined;
  /** Octal text such as `0770`. */
  mode?: string | undefined;
  /** Only when the mount point is still what Incus makes of a new volume. */
  fresh_only?: boolean | undefined;
}

/** Parses an octal mode (`0770`, `770`, `0o770`). */
export function parseMode(m: string): number {
  const t = m.trim().replace(/^0o/, "");
  const v = /^[0-7]{1,5}$/.test(t) ? parseInt(t, 8) : NaN;
  if (!(v <= 0o7777)) throw new IsbError("invalid", `mode "${m}" is not an octal mode like 0770`);
  return v;
}

async function stat(incus: IncusClient, name: string, path: string) {
  try {
    const f = await incus.pullFile(name, path);
    return { uid: f.uid, gid: f.gid, mode: f.mode & 0o7777 };
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

async function run(incus: IncusClient, name: string, argv: string[], step: string) {
  const r = await incus.execCapture(name, argv, { timeoutMs: 60_000 });
  if (r.exitCode !== 0) {
    const why = new TextDecoder().decode(r.stderr).trim() || `exit ${r.exitCode}`;
    throw new IsbError("operation_failed", `${step} failed: ${why}`, { data: { step } });
  }
}

/** Applies one fixup in `name`; false when `fresh_only` left a seeded mount point alone. */
export async function applyOwnerFix(
  incus: IncusClient,
  name: string,
  fix: OwnerFix,
): Promise<boolean> {
  const step = (what: string) => `${what} ${fix.path} in ${name}`;
  const mode = fix.mode === undefined ? undefined : parseMode(fix.mode);
  let ids: GuestIds | undefined;
  if (fix.owner !== undefined) {
    const r = await resolveGuestIds(incus, name, fix.owner);
    const s = step(`chown ${fix.owner}`);
    if (typeof r === "string") {
      throw new IsbError("operation_failed", `${s} failed: ${r}`, { data: { step: s } });
    }
    ids = r;
  }
  const st = await stat(incus, name, fix.path);
  if (!st) {
    const s = step("stat");
    throw new IsbError("operation_failed", `${s} failed: the mount point does not exist`, {
      data: { step: s },
    });
  }
  if (fix.fresh_only && (st.uid !== 0 || (st.mode !== FRESH_MODE && st.mode !== mode))) {
    return false;
  }
  if (ids) {
    const s = step(`chown ${fix.owner}`);
    const chown = (p: string) => run(incus, name, ["chown", `${ids!.uid}:${ids!.gid}`, p], s);
    await chown(fix.path);
    const home = (ids.home ?? "").replace(/\/+$/, "");
    if (home !== "" && fix.path.startsWith(`${home}/`)) {
      for (let d = parentDir(fix.path); d !== home && d !== "/"; d = parentDir(d)) {
        const ps = await stat(incus, name, d);
        if (!ps || ps.uid !== 0) break;
        await chown(d);
      }
    }
  }
  if (mode !== undefined) {
    await run(incus, name, ["chmod", mode.toString(8).padStart(4, "0"), fix.path], step("chmod"));
  }
  return true;
}
