/**
 * Host paths `isb rpc` never reads nor mounts, whatever its working directory: the isx
 * configuration (credentials), the isx state (the proxy CA's key) and `~/.ssh`. The process
 * is started with `--deny-read` of them (cli/permissions.ts), but a symlink in the working
 * directory resolves past a Deno denial and Incus mounts bind sources itself, so secret
 * files and bind sources are also checked here by their canonical path. Pure.
 *
 * @module
 */

import { posix } from "node:path";
import { IsbError } from "../../errors.ts";

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

/** Throws `invalid` when a bind of `path` would expose a protected root below it. */
export function refuseExposing(what: string, path: string, roots: readonly string[]): void {
  const root = exposedRoot(path, roots);
  if (root === undefined) return;
  throw new IsbError(
    "invalid",
    `${what} ${path} holds ${root}, which isb rpc never exposes: it holds the host user's ` +
      "credentials or keys (the isx configuration and state, ~/.ssh); bind a directory " +
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
    `${what} ${path} is under ${root}, which isb rpc never reads: it holds the host user's ` +
      "credentials or keys (the isx configuration and state, ~/.ssh); keep the file in the " +
      "project's directory",
    { data: { path } },
  );
}
