/**
 * The pure half of `get_diff` (spec §2.11): the `base.txt` lines a task's run 1 records
 * (`<commit> <repo physical path>` per repository), git's NUL-separated numstat, and the
 * size rule for the patch. The I/O half (git.ts) runs git; the host formats the answer.
 *
 * @module
 */

/** One repository and the commit it was at when the task's run 1 started. */
export interface RepoBase {
  /** The commit (or git's empty tree for a repository without one). */
  commit: string;
  /** The repository's top level, a physical absolute path. */
  repo: string;
}

/** One changed file: line counts, null for a binary file. */
export interface DiffFile {
  /** The path relative to the repository. */
  path: string;
  /** Lines added, null when binary. */
  added: number | null;
  /** Lines deleted, null when binary. */
  deleted: number | null;
}

/** What `get_diff` answers (before the host formats it). */
export interface DiffResult {
  /** Per repository, the changed files. */
  repos: { repo: string; files: DiffFile[] }[];
  /** The unified diff of every repository, when asked for and not too large. */
  patch?: string;
  /** The patch's size in bytes (also when too large). */
  patch_bytes: number;
  /** True when the patch exceeded the limit (then no `patch`). */
  too_large: boolean;
}

/** git's empty tree: the base of a repository that had no commit at run 1. */
export const EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

const COMMIT_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** `base.txt` text of these bases. */
export function formatBases(bases: readonly RepoBase[]): string {
  return bases.map((b) => `${b.commit} ${b.repo}\n`).join("");
}

/**
 * Parses `base.txt`; lines that are not `<hex commit> <absolute path>` are dropped (the
 * file lives in the guest, where anything may have rewritten it).
 */
export function parseBases(text: string): RepoBase[] {
  const out: RepoBase[] = [];
  for (const line of text.split("\n")) {
    const sp = line.indexOf(" ");
    if (sp < 0) continue;
    const commit = line.slice(0, sp);
    const repo = line.slice(sp + 1);
    if (!COMMIT_RE.test(commit) || !repo.startsWith("/") || repo.includes("\0")) continue;
    if (repo.split("/").includes("..")) continue;
    out.push({ commit, repo });
  }
  return out;
}

/** Parses `git diff --numstat -z --no-renames` output. */
export function parseNumstatZ(out: string): DiffFile[] {
  const files: DiffFile[] = [];
  for (const rec of out.split("\0")) {
    if (!rec) continue;
    const m = /^(-|\d+)\t(-|\d+)\t([\s\S]+)$/.exec(rec.replace(/^\n/, ""));
    if (!m) continue;
    files.push({
      path: m[3]!,
      added: m[1] === "-" ? null : Number(m[1]),
      deleted: m[2] === "-" ? null : Number(m[2]),
    });
  }
  return files;
}

/** The limit of the patch, clamped as the spec says (1 KiB…1 MiB, default 256 KiB). */
export function patchLimit(maxBytes: number | undefined): number {
  if (maxBytes === undefined || !Number.isFinite(maxBytes)) return 256 * 1024;
  return Math.min(1024 * 1024, Math.max(1024, Math.floor(maxBytes)));
}
