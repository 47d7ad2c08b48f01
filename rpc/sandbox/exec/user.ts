/**
 * Who an exec runs as (shared/spec/isb-rpc.md §11): a user spec `NAME`, `UID`, `UID:GID` or
 * `NAME:GROUP` resolved inside the guest, because only the guest knows its accounts.
 *
 * A numeric user needs no lookup for its ids (the gid defaults to the uid); its name, home
 * and shell come from the guest's `/etc/passwd`, read through the file API, when it is
 * listed there. A name is looked up with `getent passwd` run as root (so NSS sources count),
 * then in `/etc/passwd`; a group with `getent group`, then `/etc/group`. A user or group that
 * is nowhere is `invalid` ("no such user NAME in INSTANCE"). Failures to reach the guest
 * (connect, timeouts, API errors) are not "no such user": they surface as themselves.
 *
 * @module
 */

import { IsbError, isNotFound } from "../../errors.ts";
import type { IncusClient } from "../../incus/mod.ts";

/** The client calls user resolution makes. */
export type UserClient = Pick<IncusClient, "execCapture" | "pullFile">;

/** One `/etc/passwd` line. */
export interface PasswdEntry {
  /** The login name (first field). */
  name: string;
  /** The numeric user id (third field). */
  uid: number;
  /** The primary group id (fourth field). */
  gid: number;
  /** The home directory, which becomes the exec's `HOME` (sixth field). */
  home: string;
  /** The login shell, used for login execs (seventh field, trimmed). */
  shell: string;
}

/** The resolved identity of an exec. */
export interface ExecUser {
  /** The uid the command runs as. */
  uid: number;
  /** The gid the command runs as: the named group, else the user's primary group. */
  gid: number;
  /** The passwd entry, when the user has one. */
  entry?: PasswdEntry;
}

const NUMERIC = /^[0-9]+$/;

/** Parses one passwd line (`name:x:uid:gid:gecos:home:shell`); undefined if malformed. */
export function parsePasswdLine(line: string): PasswdEntry | undefined {
  const f = line.split(":");
  if (f.length < 7 || !NUMERIC.test(f[2]!) || !NUMERIC.test(f[3]!)) return undefined;
  return { name: f[0]!, uid: Number(f[2]), gid: Number(f[3]), home: f[5]!, shell: f[6]!.trim() };
}

/** Finds a user in a passwd file's text by name or uid. */
export function findPasswd(text: string, who: string | number): PasswdEntry | undefined {
  for (const line of text.split("\n")) {
    const e = parsePasswdLine(line);
    if (e && (typeof who === "number" ? e.uid === who : e.name === who)) return e;
  }
  return undefined;
}

/** Finds a group's gid in a group file's text (`name:x:gid:members`). */
export function findGroup(text: string, name: string): number | undefined {
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length >= 3 && f[0] === name && NUMERIC.test(f[2]!)) return Number(f[2]);
  }
  return undefined;
}

/** The login shell of an entry: its shell unless that refuses logins, else `/bin/sh`. */
export function loginShell(entry: PasswdEntry | undefined): string {
  const shell = entry?.shell ?? "";
  if (!shell || shell.endsWith("nologin") || shell.endsWith("/false")) return "/bin/sh";
  return shell;
}

/** Resolves a user spec in `instance`; `undefined` is root (uid 0, no lookup). */
export async function resolveExecUser(
  client: UserClient,
  instance: string,
  spec: string | undefined,
  opts: { needEntry?: boolean } = {},
): Promise<ExecUser> {
  if (spec === undefined || spec === "") {
    if (!opts.needEntry) return { uid: 0, gid: 0 };
    const entry = await passwdFromFile(client, instance, 0);
    return entry ? { uid: 0, gid: 0, entry } : { uid: 0, gid: 0 };
  }
  const colon = spec.indexOf(":");
  const userPart = colon < 0 ? spec : spec.slice(0, colon);
  const groupPart = colon < 0 ? undefined : spec.slice(colon + 1);
  let uid: number;
  let gid: number | undefined;
  let entry: PasswdEntry | undefined;
  if (NUMERIC.test(userPart)) {
    uid = Number(userPart);
    entry = await passwdFromFile(client, instance, uid);
  } else {
    entry = await lookupUser(client, instance, userPart);
    if (!entry) throw new IsbError("invalid", `no such user ${userPart} in ${instance}`);
    uid = entry.uid;
    gid = entry.gid;
  }
  if (groupPart !== undefined && groupPart !== "") {
    gid = await resolveGroup(client, instance, groupPart);
  } else if (NUMERIC.test(userPart)) {
    gid = uid; // the spec: a numeric user's gid defaults to its uid
  }
  return entry ? { uid, gid: gid ?? uid, entry } : { uid, gid: gid ?? uid };
}

async function lookupUser(
  client: UserClient,
  instance: string,
  name: string,
): Promise<PasswdEntry | undefined> {
  const r = await client.execCapture(instance, ["getent", "passwd", name]);
  if (r.exitCode === 0) {
    const entry = findPasswd(new TextDecoder().decode(r.stdout), name);
    if (entry) return entry;
  }
  return passwdFromFile(client, instance, name);
}

async function resolveGroup(client: UserClient, instance: string, group: string): Promise<number> {
  if (NUMERIC.test(group)) return Number(group);
  const r = await client.execCapture(instance, ["getent", "group", group]);
  if (r.exitCode === 0) {
    const gid = findGroup(new TextDecoder().decode(r.stdout), group);
    if (gid !== undefined) return gid;
  }
  const text = await readGuestFile(client, instance, "/etc/group");
  const gid = text === undefined ? undefined : findGroup(text, group);
  if (gid === undefined) throw new IsbError("invalid", `no such group ${group} in ${instance}`);
  return gid;
}

async function passwdFromFile(
  client: UserClient,
  instance: string,
  who: string | number,
): Promise<PasswdEntry | undefined> {
  const text = await readGuestFile(client, instance, "/etc/passwd");
  return text === undefined ? undefined : findPasswd(text, who);
}

/** A guest file's text, or undefined when it does not exist. */
async function readGuestFile(
  client: UserClient,
  instance: string,
  path: string,
): Promise<string | undefined> {
  try {
    return new TextDecoder().decode((await client.pullFile(instance, path)).data);
  } catch (e) {
    // A missing file reads as "no entry"; a missing *instance* is a real not_found.
    if (isNotFound(e) && !/instance not found/i.test(e.message)) return undefined;
    throw e;
  }
}
