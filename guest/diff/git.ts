/**
 * The I/O half of `get_diff`, run in the guest as the agent user: find the repositories a
 * task works in (the one at or above its cwd, and `.git` directories up to three levels
 * below), record the commit each is at (run 1), and later compare each against that commit
 * — committed, uncommitted and untracked changes alike — through a throwaway index
 * (`GIT_INDEX_FILE` in a temporary directory), so the repository's own index is never
 * touched. git is spawned without a shell; a client's pathspec is one argument after `--`.
 * Everything runs under one deadline, and the patch is kept only up to its limit (its size
 * is still counted).
 *
 * @module
 */

import {
  type DiffFile,
  type DiffResult,
  EMPTY_TREE,
  parseNumstatZ,
  patchLimit,
  type RepoBase,
} from "./core.ts";

/** Options of the git calls. */
export interface GitDeadline {
  /** Aborts every git call still running (the caller's deadline). */
  signal: AbortSignal;
}

/** A git call that failed (or was stopped by the deadline). */
export class GitError extends Error {
  /** "timeout" when the deadline stopped it. */
  readonly kind: "failed" | "timeout";
  constructor(message: string, kind: "failed" | "timeout") {
    super(message);
    this.name = "GitError";
    this.kind = kind;
  }
}

// no user hooks or helpers of the repository's config run on our behalf
const SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"];

async function git(
  repo: string,
  args: string[],
  opts: GitDeadline & { env?: Record<string, string>; limit?: number; mayFail?: boolean },
): Promise<{ text: string; bytes: number }> {
  const limit = opts.limit ?? 64 * 1024 * 1024;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("git", {
      args: [...SAFE, "-C", repo, ...args],
      env: { GIT_TERMINAL_PROMPT: "0", GIT_OPTIONAL_LOCKS: "0", ...opts.env },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: opts.signal,
    }).spawn();
  } catch (e) {
    throw new GitError(`git ${args[0]}: ${(e as Error).message}`, "failed");
  }
  const kept: Uint8Array[] = [];
  let bytes = 0;
  let keptBytes = 0;
  const read = (async () => {
    for await (const chunk of child.stdout) {
      bytes += chunk.length;
      if (keptBytes < limit) {
        const part = chunk.subarray(0, limit - keptBytes);
        kept.push(part);
        keptBytes += part.length;
      }
    }
  })();
  const [status, , err] = await Promise.all([
    child.status,
    read,
    new Response(child.stderr).text(),
  ]);
  if (opts.signal.aborted) throw new GitError(`git ${args[0]} in ${repo}: timed out`, "timeout");
  if (!status.success && !opts.mayFail) {
    throw new GitError(`git ${args[0]} in ${repo}: ${err.trim().slice(-400)}`, "failed");
  }
  const all = new Uint8Array(keptBytes);
  let off = 0;
  for (const k of kept) {
    all.set(k, off);
    off += k.length;
  }
  return { text: new TextDecoder().decode(all), bytes };
}

async function isDir(p: string): Promise<boolean> {
  try {
    return (await Deno.lstat(p)).isDirectory;
  } catch {
    return false;
  }
}

/** The repositories of a cwd: the one at or above it, and `.git`s up to 3 levels below. */
export async function findRepos(cwd: string, opts: GitDeadline): Promise<string[]> {
  const found = new Set<string>();
  try {
    const top = await git(cwd, ["rev-parse", "--show-toplevel"], opts);
    if (top.text.trim()) found.add(await Deno.realPath(top.text.trim()));
  } catch (e) {
    if (e instanceof GitError && e.kind === "timeout") throw e;
    // not inside a repository
  }
  const walk = async (dir: string, depth: number): Promise<void> => {
    if (depth > 3 || opts.signal.aborted) return;
    let entries: Deno.DirEntry[];
    try {
      entries = await Array.fromAsync(Deno.readDir(dir));
    } catch {
      return;
    }
    if (depth > 0 && entries.some((e) => e.name === ".git")) {
      found.add(await Deno.realPath(dir));
    }
    for (const e of entries) {
      if (e.isDirectory && !e.isSymlink && e.name !== ".git" && e.name !== "node_modules") {
        await walk(`${dir}/${e.name}`, depth + 1);
      }
    }
  };
  if (await isDir(cwd)) await walk(cwd, 0);
  return [...found].sort();
}

/** Each repository of `cwd` and the commit it is at now (the empty tree if it has none). */
export async function recordBases(cwd: string, opts: GitDeadline): Promise<RepoBase[]> {
  const out: RepoBase[] = [];
  for (const repo of await findRepos(cwd, opts)) {
    let commit = EMPTY_TREE;
    try {
      const r = await git(repo, ["rev-parse", "--verify", "-q", "HEAD^{commit}"], opts);
      commit = r.text.trim() || EMPTY_TREE;
    } catch (e) {
      if (e instanceof GitError && e.kind === "timeout") throw e;
    }
    out.push({ commit, repo });
  }
  return out;
}

/** What to compare. */
export interface DiffOptions extends GitDeadline {
  /** A pathspec relative to each repository. */
  path?: string;
  /** Only the per-file counts, no patch. */
  stat?: boolean;
  /** The patch limit (clamped 1 KiB…1 MiB; default 256 KiB). */
  maxBytes?: number;
}

/** Compares every recorded repository with its base through a throwaway index. */
export async function diffRepos(
  bases: readonly RepoBase[],
  opts: DiffOptions,
): Promise<DiffResult> {
  const limit = patchLimit(opts.maxBytes);
  const tmp = await Deno.makeTempDir({ prefix: "isx-diff-" });
  const repos: { repo: string; files: DiffFile[] }[] = [];
  const patches: string[] = [];
  let patchBytes = 0;
  try {
    for (const [i, b] of bases.entries()) {
      // a recorded repository inside this one is compared on its own, not as a gitlink here
      const nested = bases.filter((o) => o.repo.startsWith(`${b.repo}/`))
        .map((o) => `:(exclude,top,literal)${o.repo.slice(b.repo.length + 1)}`);
      const spec = ["--", opts.path ?? ".", ...nested];
      const env = { GIT_INDEX_FILE: `${tmp}/index-${i}` };
      const o = { ...opts, env };
      await git(b.repo, ["read-tree", b.commit], o);
      // an embedded repository without a commit cannot be added: skip it, add the rest
      await git(b.repo, ["add", "-A", "--ignore-errors", "--", ".", ...nested], {
        ...o,
        mayFail: true,
      });
      const flags = ["diff", "--cached", "--no-renames", "--no-ext-diff", "--no-textconv"];
      const stat = await git(b.repo, [...flags, "--numstat", "-z", b.commit, ...spec], o);
      repos.push({ repo: b.repo, files: parseNumstatZ(stat.text) });
      if (opts.stat) continue;
      const prefix = bases.length > 1
        ? [`--src-prefix=a${b.repo}/`, `--dst-prefix=b${b.repo}/`]
        : [];
      const p = await git(b.repo, [...flags, "--no-color", ...prefix, b.commit, ...spec], {
        ...o,
        limit: Math.max(0, limit - patchBytes),
      });
      patchBytes += p.bytes;
      patches.push(p.text);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
  if (opts.stat) return { repos, patch_bytes: 0, too_large: false };
  const tooLarge = patchBytes > limit;
  return {
    repos,
    ...(tooLarge ? {} : { patch: patches.join("") }),
    patch_bytes: patchBytes,
    too_large: tooLarge,
  };
}
