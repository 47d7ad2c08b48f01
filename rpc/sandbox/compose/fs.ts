/**
 * The file access of the compose loader, injected so tests and benchmarks can feed strings:
 * the interface, and Deno's file system, whose refusals outside rpc mode's read grant say
 * what to do instead of suggesting `--allow-read`; and {@link protectFs}, the same access
 * refusing the protected host paths through the one check of `rpc/host_paths.ts`.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import { checkHostFile } from "../../host_paths.ts";

/** File access the loader needs (injected so tests and benchmarks can feed strings). */
export interface ComposeFs {
  /** Reads a file. */
  readTextFile(path: string): Promise<string>;
  /** True for an existing regular file. */
  isFile(path: string): Promise<boolean>;
  /** Canonical path. */
  realPath(path: string): Promise<string>;
}

/** Deno's file system; a path outside rpc mode's read grant gets an error that says what to do. */
export const DENO_FS: ComposeFs = {
  readTextFile: (p) => Deno.readTextFile(p).catch((e) => Promise.reject(notPermitted(e, p))),
  isFile: (p) =>
    Deno.stat(p).then((s) => s.isFile, (e) => {
      if (e instanceof Deno.errors.NotCapable) throw notPermitted(e, p);
      return false;
    }),
  realPath: (p) => Deno.realPath(p).catch((e) => Promise.reject(notPermitted(e, p))),
};

function notPermitted(e: unknown, path: string): unknown {
  if (!(e instanceof Deno.errors.NotCapable)) return e;
  return new IsbError(
    "invalid",
    `${path}: isb rpc reads files only under its working directory, the temp directory and ` +
      "its own state, and never the isx configuration and state or ~/.ssh: start isb rpc " +
      "from the project's directory (or pass paths under it)",
    { cause: e, data: { path } },
  );
}

/**
 * `fs` refusing files whose canonical path is protected: a compose or env file that is a
 * symlink into `~/.ssh` would otherwise be read past Deno's denial (and an env file's values
 * end up in a sandbox's environment). Paths reach it absolute (the loader joins them), so
 * `~` is not expanded here: the loader has expanded what it means.
 */
export function protectFs(fs: ComposeFs, roots: readonly string[]): ComposeFs {
  if (roots.length === 0) return fs;
  const check = (p: string) =>
    checkHostFile("file", p, { home: "/", baseDir: "/", roots, realPath: (q) => fs.realPath(q) });
  return {
    readTextFile: async (p) => (await check(p), await fs.readTextFile(p)),
    isFile: async (p) => (await check(p), await fs.isFile(p)),
    realPath: (p) => fs.realPath(p),
  };
}
