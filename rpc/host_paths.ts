/**
 * The one check every host path a client names goes through before it can reach an instance
 * (isb-rpc.md §8.2; docs/rpc_sandbox.md, "Host paths"): bind sources, `raw_devices` and mount
 * `options` disk sources, unix sockets of proxy devices, secret files, compose and env files,
 * and the source files of isx templates and tools.
 *
 * {@link canonicalHostPath} turns what was written into the path the kernel would open: `~`,
 * `~/…`, `$HOME` and `${HOME}` expand to the home, a relative path joins its base, `.`, `..`
 * and repeated or trailing slashes go, and the longest prefix that exists is replaced by its
 * real path (symlinks resolved), so a link into `~/.ssh` and a not-yet-existing path below
 * one are both seen where they lead. {@link checkHostPath} then refuses, with `invalid` naming
 * the key and the path, a path that is or lies under a protected root, or that holds one (a
 * bind of `~` or `/` would expose `~/.ssh`); it checks the spelling as written and the
 * canonical path, and returns the canonical one: the caller mounts what was checked, never
 * the string it was given.
 *
 * The protected roots ({@link protectedHostPaths}): the isx configuration (credentials), the
 * isx and isb state (the proxy's and the egress CAs' keys), the user's and root's `~/.ssh`
 * and the other credential stores under home, `SSH_AUTH_SOCK`'s directory, the Incus socket, the host's own
 * secrets (`/etc/ssh`, `/etc/shadow`, …), the Incus state and socket, and `/dev`, `/proc`,
 * `/sys`, `/run` (a block device or the Incus socket holds everything else). `isb rpc` is
 * also started with `--deny-read` of the first three (cli/permissions.ts), but a symlink
 * resolves past a Deno denial and Incus mounts bind sources itself, so this check is the
 * boundary. Pure: the file system is reached only through the injected `realPath`.
 *
 * @module
 */

import * as posix from "./posix_path.ts";
import { IsbError } from "./errors.ts";

/** Credential stores under a home directory, relative to it. */
export const HOME_SECRETS: readonly string[] = [
  ".ssh",
  ".gnupg",
  ".aws",
  ".azure",
  ".kube",
  ".docker",
  ".netrc",
  ".git-credentials",
  ".password-store",
  ".config/gh",
  ".config/gcloud",
  ".config/incus",
  ".config/lxc",
  ".local/share/keyrings",
];

/** Host paths that hold secrets or everything else (devices, the Incus state and socket). */
export const SYSTEM_SECRETS: readonly string[] = [
  "/root/.ssh",
  "/etc/ssh",
  "/etc/shadow",
  "/etc/gshadow",
  "/etc/sudoers",
  "/etc/sudoers.d",
  "/etc/ssl/private",
  "/etc/incus",
  "/var/lib/incus",
  "/var/lib/lxd",
  "/var/snap/lxd",
  "/var/run",
  "/run",
  "/dev",
  "/proc",
  "/sys",
];

/** Where the protected roots of one server live (absent fields: derived from `env`). */
export interface ProtectedContext {
  /** The server's environment (HOME, XDG_CONFIG_HOME, XDG_STATE_HOME, SSH_AUTH_SOCK, INCUS_*). */
  env: Readonly<Record<string, string | undefined>>;
  /** The isb state directory (egress CAs), when it is not `$XDG_STATE_HOME/isb`. */
  isbStateDir?: string;
  /** More roots (e.g. the Deno `--deny-read` paths of the mode). */
  extra?: readonly string[];
  /**
   * Protect only `credentials.yaml` of the isx configuration, not the whole directory: isx
   * templates and tools live there and name their own files.
   */
  definitions?: boolean;
}

/** The protected roots of a server with environment `c.env` (absolute, deduplicated). */
export function protectedHostPaths(c: ProtectedContext): string[] {
  const get = (k: string) => (c.env[k] === undefined || c.env[k] === "" ? undefined : c.env[k]);
  const home = (get("HOME") ?? "/root").replace(/(.)\/+$/, "$1");
  const config = get("XDG_CONFIG_HOME") ?? `${home}/.config`;
  const state = get("XDG_STATE_HOME") ?? `${home}/.local/state`;
  const roots = [
    c.definitions ? `${config}/isx/credentials.yaml` : `${config}/isx`,
    `${state}/isx`,
    c.isbStateDir ?? `${state}/isb`,
    ...HOME_SECRETS.map((s) => `${home}/${s}`),
    ...SYSTEM_SECRETS,
    ...(c.extra ?? []),
  ];
  const agent = get("SSH_AUTH_SOCK");
  if (agent?.startsWith("/")) roots.push(posix.dirname(agent));
  const socket = get("INCUS_SOCKET") ??
    (get("INCUS_DIR") ? `${get("INCUS_DIR")}/unix.socket` : undefined);
  if (socket?.startsWith("/")) roots.push(socket); // (its directory may be anyone's)
  if (get("INCUS_DIR")?.startsWith("/")) roots.push(get("INCUS_DIR")!);
  const out = roots.filter((r) => r.startsWith("/")).map((r) => posix.normalize(r))
    .map((r) => r.replace(/(.)\/+$/, "$1"));
  return [...new Set(out)].filter((r) => r !== "/");
}

/** The protected root that holds `path`, if any (both absolute; no symlinks resolved here). */
export function protectedRoot(path: string, roots: readonly string[]): string | undefined {
  const p = posix.normalize(path);
  for (const r of roots) {
    const root = posix.normalize(r).replace(/\/+$/, "");
    if (root !== "" && (p === root || p.startsWith(`${root}/`))) return root;
  }
  return undefined;
}

/** The protected root that lies strictly under `path` (a bind of it would expose the root). */
export function exposedRoot(path: string, roots: readonly string[]): string | undefined {
  const p = posix.normalize(path).replace(/\/+$/, "");
  for (const r of roots) {
    const root = posix.normalize(r).replace(/\/+$/, "");
    if (root !== "" && root.startsWith(`${p}/`)) return root;
  }
  return undefined;
}

const WHY = "it holds the host user's credentials or keys, or the host's own " +
  "(the isx configuration and state, ~/.ssh, the Incus socket, devices)";

/** Throws `invalid` when a bind of `path` would expose a protected root below it. */
export function refuseExposing(what: string, path: string, roots: readonly string[]): void {
  const root = exposedRoot(path, roots);
  if (root === undefined) return;
  throw new IsbError(
    "invalid",
    `${what} ${path} holds ${root}, which isb rpc never exposes: ${WHY}; bind a directory ` +
      "that does not contain it",
    { data: { path } },
  );
}

/** Throws `invalid` naming `what`, the path and why, when `path` is under a protected root. */
export function refuseProtected(what: string, path: string, roots: readonly string[]): void {
  const root = protectedRoot(path, roots);
  if (root === undefined) return;
  throw new IsbError(
    "invalid",
    `${what} ${path} is under ${root}, which isb rpc never reads: ${WHY}; keep the file in ` +
      "the project's directory",
    { data: { path } },
  );
}

/** What {@link canonicalHostPath} needs. */
export interface HostPathContext {
  /** The home `~`, `$HOME` and `${HOME}` expand to. */
  home: string;
  /** Anchors relative paths (absolute). */
  baseDir: string;
  /** Real path of an existing path; undefined when missing (may throw when not permitted). */
  realPath(path: string): string | undefined;
  /** The protected roots ({@link protectedHostPaths}). */
  roots: readonly string[];
  /** Who refuses, in messages (`isb rpc` by default; `isx` for template files). */
  who?: string;
}

/** `path` with `~`, `~/…`, `$HOME…` and `${HOME}…` expanded, made absolute and normalised. */
export function absoluteHostPath(
  path: string,
  c: Pick<HostPathContext, "home" | "baseDir">,
): string {
  const home = c.home.replace(/(.)\/+$/, "$1");
  const m = /^(~|\$HOME|\$\{HOME\})(\/|$)/.exec(path);
  const expanded = m ? `${home}${path.slice(m[1]!.length)}` : path;
  const base = posix.isAbsolute(c.baseDir) ? c.baseDir : posix.join("/", c.baseDir);
  const abs = posix.isAbsolute(expanded) ? expanded : `${base}/${expanded}`;
  return posix.normalize(abs).replace(/(.)\/+$/, "$1");
}

/**
 * The path the kernel would open for `path`: {@link absoluteHostPath}, then the longest
 * existing prefix replaced by its real path. Undefined when a prefix cannot be resolved (the
 * server may not read it): the caller refuses then, it cannot know where the path leads.
 */
export function canonicalHostPath(path: string, c: HostPathContext): string | undefined {
  const abs = absoluteHostPath(path, c);
  const parts = abs.split("/").filter((p) => p !== "");
  for (let k = parts.length; k >= 0; k--) {
    const prefix = `/${parts.slice(0, k).join("/")}`;
    let real: string | undefined;
    try {
      real = c.realPath(prefix);
    } catch {
      return undefined;
    }
    if (real === undefined) continue;
    const rest = parts.slice(k).join("/");
    return posix.normalize(rest === "" ? real : `${real}/${rest}`).replace(/(.)\/+$/, "$1");
  }
  return abs;
}

/**
 * Checks a host path that `key` names (e.g. `raw_devices.keys.source`) and returns its
 * canonical form, which is what must be used. Throws `invalid` naming the key and the path
 * when it is, lies under, or (unless `file`) holds a protected root, or cannot be resolved.
 */
export function checkHostPath(
  key: string,
  path: string,
  c: HostPathContext & { file?: boolean },
): string {
  const what = `${key} ${path}`;
  if (path === "" || path.includes("\0")) {
    throw new IsbError("invalid", `${key}: ${JSON.stringify(path)} is not a host path`, {
      data: { key, path },
    });
  }
  const abs = absoluteHostPath(path, c);
  refuseIn(abs === path ? what : `${what} (${abs})`, abs, key, c);
  const canon = canonicalHostPath(path, c);
  if (canon === undefined) {
    throw new IsbError(
      "invalid",
      `${what}: cannot resolve ${abs}: ${
        c.who ?? "isb rpc"
      } may not read it, so it cannot tell where it ` +
        "leads; use a path under the project's directory",
      { data: { key, path } },
    );
  }
  if (canon !== abs) refuseIn(`${what}, a link to ${canon}`, canon, key, c);
  return canon;
}

function refuseIn(
  what: string,
  path: string,
  key: string,
  c: { roots: readonly string[]; file?: boolean; who?: string },
): void {
  const under = protectedRoot(path, c.roots);
  const holds = c.file ? undefined : exposedRoot(path, c.roots);
  if (under === undefined && holds === undefined) return;
  const who = c.who ?? "isb rpc";
  const how = under !== undefined
    ? `is under ${under}, which ${who} never reads`
    : `holds ${holds}, which ${who} never exposes`;
  throw new IsbError("invalid", `${what} ${how}: ${WHY}`, { data: { key, path } });
}

/**
 * {@link checkHostPath} for a file read through an async file system (compose, env and
 * secret files): its real path is asked once, then the same check runs. Returns the
 * canonical path.
 */
export async function checkHostFile(
  key: string,
  path: string,
  c: Omit<HostPathContext, "realPath"> & { realPath?: (p: string) => Promise<string> },
): Promise<string> {
  const abs = absoluteHostPath(path, c);
  const real = await c.realPath?.(abs).catch(() => undefined);
  return checkHostPath(key, path, {
    home: c.home,
    baseDir: c.baseDir,
    roots: c.roots,
    ...(c.who ? { who: c.who } : {}),
    realPath: (p) => (p === abs ? real : undefined),
    file: true,
  });
}
