/**
 * Loading a compose project (isb-rpc.md §12.1–12.5), the one module of `compose/` that does
 * I/O, and only through injected functions (`readTextFile`, `isFile`, `realPath`), so tests
 * feed it strings: which files, the `.env` files, each file's tree (`_document.ts`: YAML,
 * docker-only keys, interpolation, list forms, the file validated alone, errors naming it)
 * merged in order. Then the merged file is validated,
 * defaults are filled, and §12.5's rules are checked (errors name `a.yaml + b.yaml`).
 * Every failure is `parse` with `data: {path}` and the message `<path>: <detail>`.
 *
 * @module
 */

import { posix } from "node:path";
import { invalid } from "../../errors.ts";
import {
  type ComposeFile,
  ComposeFileSchema,
  issuesMessage,
  serializeComposeFile,
} from "../spec/spec.ts";
import { detailOf, fileTree, parseError, type Tree } from "./_document.ts";
import { parseEnvFile } from "./_envfile.ts";
import type { Lookup } from "./_interpolate.ts";
import { mergeFiles } from "./_merge.ts";
import { finishComposeFile, selectExact, selectServices } from "./_validate.ts";

/** Default file names, tried in order, and their override files. */
export const DEFAULT_FILES = ["isb.yaml", "isb.yml"];
/** Merged over the default file when no files are named. */
export const OVERRIDE_FILES = ["isb.override.yaml", "isb.override.yml"];

/** How to load, and the I/O the loader may do. */
export interface LoadOptions {
  /** Where default files are looked for and relative paths resolve (the server's cwd). */
  cwd: string;
  /** Compose files in merge order; empty or absent: the defaults in `cwd`. */
  files?: string[];
  /** dotenv files; absent or empty: `.env` beside the first file, if it is a file. */
  envFiles?: string[];
  projectName?: string;
  /** Variables that win over the environment and env files. */
  vars?: Record<string, string>;
  /** The server's environment. */
  env: (name: string) => string | undefined;
  readTextFile(path: string): Promise<string>;
  isFile(path: string): Promise<boolean>;
  /** Canonicalises the base directory; absent: the path as joined. */
  realPath?(path: string): Promise<string>;
}

/** A loaded project. */
export interface ComposeProject {
  /** The sanitised project name. */
  name: string;
  /** Directory of the first file (canonical): anchors bind sources and `.env`. */
  baseDir: string;
  /** The files as given (or as found). */
  files: string[];
  /** The merged file with names filled in. */
  file: ComposeFile;
  /** Variable lookup as interpolation saw it (vars → environment → env files). */
  lookup: Lookup;
}

async function discover(opts: LoadOptions): Promise<string[]> {
  if (opts.files && opts.files.length > 0) return opts.files;
  const files: string[] = [];
  for (const list of [DEFAULT_FILES, OVERRIDE_FILES]) {
    for (const f of list) {
      if (await opts.isFile(posix.join(opts.cwd, f))) {
        files.push(`./${f}`);
        break;
      }
    }
    if (files.length === 0) {
      throw invalid(
        `no compose file in ${opts.cwd} (isb reads only ./${
          DEFAULT_FILES.join(" or ./")
        }, never a ` +
          "parent directory's; pass files to name another)",
      );
    }
  }
  return files;
}

/** Loads, merges and validates a compose project. Throws `parse` (or `invalid` for no file). */
export async function loadCompose(opts: LoadOptions): Promise<ComposeProject> {
  const files = await discover(opts);
  const abs = (p: string) => posix.resolve(opts.cwd, p);
  let baseDir = posix.dirname(abs(files[0]!));
  if (opts.realPath) baseDir = await opts.realPath(baseDir).catch(() => baseDir);
  const envFiles = opts.envFiles && opts.envFiles.length > 0
    ? opts.envFiles
    : (await opts.isFile(posix.join(baseDir, ".env")))
    ? [posix.join(baseDir, ".env")]
    : [];
  const dotenv: Record<string, string> = {};
  for (const f of envFiles) {
    let text: string;
    try {
      text = await opts.readTextFile(abs(f));
      for (const [k, v] of parseEnvFile(text)) dotenv[k] = v;
    } catch (e) {
      throw parseError(f, detailOf(e));
    }
  }
  const vars = opts.vars ?? {};
  const lookup: Lookup = (k) =>
    (Object.hasOwn(vars, k) ? vars[k] : undefined) ?? opts.env(k) ??
      (Object.hasOwn(dotenv, k) ? dotenv[k] : undefined);
  let merged: Tree = {};
  for (const f of files) {
    let text: string;
    try {
      text = await opts.readTextFile(abs(f));
    } catch (e) {
      throw parseError(f, detailOf(e));
    }
    const doc = fileTree(f, text, lookup);
    if (doc !== undefined) merged = mergeFiles(merged, doc);
  }
  const all = files.join(" + ");
  const r = ComposeFileSchema.safeParse(merged);
  if (!r.success) throw parseError(all, issuesMessage(r.error));
  const file = r.data;
  let name: string;
  try {
    name = finishComposeFile(file, {
      projectName: opts.projectName,
      baseName: posix.basename(baseDir) || "isb",
    });
  } catch (e) {
    throw parseError(all, detailOf(e));
  }
  return { name, baseDir, files, file, lookup };
}

/** The `compose.load` result: the resolved file, serialised. */
export interface ComposeLoadResult {
  /** The sanitised project name. */
  name: string;
  /** The first file's directory (canonical). */
  base_dir: string;
  /** The files as given or found. */
  files: string[];
  /** The merged file with names and defaults filled. */
  file: Record<string, unknown>;
}

/** The `compose.load` result: `{name, base_dir, files, file}` with the file serialised. */
export function composeLoadResult(p: ComposeProject): ComposeLoadResult {
  return {
    name: p.name,
    base_dir: p.baseDir,
    files: [...p.files],
    file: serializeComposeFile(p.file),
  };
}

/** The files as messages name them (`a.yaml, b.yaml`). */
export function filesDisplay(p: ComposeProject): string {
  return p.files.join(", ");
}

/** Services for `up`/`plan`: the named ones plus their dependencies, in dependency order. */
export function projectServices(p: ComposeProject, services?: string[]): string[] {
  return selectServices(p.file, { files: filesDisplay(p), ...(services ? { services } : {}) });
}

/** Services for `down`: exactly the named ones (all when none), in dependency order. */
export function projectServicesExact(p: ComposeProject, services?: string[]): string[] {
  return selectExact(p.file, { files: filesDisplay(p), ...(services ? { services } : {}) });
}
