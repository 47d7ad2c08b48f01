/**
 * Loading a compose project (isb-rpc.md §12.1–12.5), the one module of `compose/` that does
 * I/O, and only through injected functions (`readTextFile`, `isFile`, `realPath`), so tests
 * feed it strings. Per file: YAML (anchors, aliases, `<<` merge keys) → drop `x-*` and
 * `version` → reject docker-only keys with a hint → interpolate → list forms to maps →
 * validate the file alone (errors name it) → merge. Then the merged file is validated,
 * defaults are filled, and §12.5's rules are checked (errors name `a.yaml + b.yaml`).
 * Every failure is `parse` with `data: {path}` and the message `<path>: <detail>`.
 *
 * @module
 */

import { CORE_SCHEMA, loadAll, mergeTag } from "js-yaml";
import { posix } from "node:path";
import { invalid, IsbError } from "../../errors.ts";
import {
  type ComposeFile,
  ComposeFileSchema,
  issuesMessage,
  serializeComposeFile,
} from "../spec/spec.ts";
import { parseEnvFile } from "./envfile.ts";
import { interpolateTree, type Lookup } from "./interpolate.ts";
import { mergeFiles } from "./merge.ts";
import { finishComposeFile, selectExact, selectServices } from "./validate.ts";

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

const DOCKER_ONLY_TOP: Record<string, string> = {
  networks: "networking comes from incus profiles (incus_profiles)",
  configs: "bind-mount the file instead",
  include: "pass several files",
  sandboxes: "services are under services:",
  project: "the incus project is incus_project:",
};

const DOCKER_ONLY_SERVICE: Record<string, string> = {
  build: "isb runs incus images: build one and name it in image",
  env_file: "list the variables under environment",
  profiles: "docker's service profiles are not supported; incus profiles are incus_profiles",
  networks: "networking comes from incus profiles (incus_profiles) or raw_devices",
  network_mode: "networking comes from incus profiles (incus_profiles) or raw_devices",
  hostname: "the guest's hostname is its container_name",
  expose: "use ports",
  devices: "use raw_devices",
  gpus: "use raw_devices, e.g. {gpu: {type: gpu}}",
  sysctls: "use raw_config with linux.sysctl.* keys",
  working_directory: "the key is working_dir",
  env: "the key is environment",
  memory: "the key is mem_limit",
  name: "the instance name is container_name",
};

type Tree = Record<string, unknown>;

function isMap(v: unknown): v is Tree {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function parseError(path: string, detail: string): IsbError {
  return new IsbError("parse", `${path}: ${detail}`, { data: { path } });
}

function detailOf(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  return m.replace(/^interpolation: /, "");
}

/** Drops `x-*` keys (top level and in each service) and `version`. */
function stripExtensions(doc: Tree): Tree {
  const out: Tree = {};
  for (const [k, v] of Object.entries(doc)) if (!k.startsWith("x-") && k !== "version") out[k] = v;
  if (isMap(out.services)) {
    out.services = Object.fromEntries(
      Object.entries(out.services).map(([name, svc]) => [
        name,
        isMap(svc)
          ? Object.fromEntries(Object.entries(svc).filter(([k]) => !k.startsWith("x-")))
          : svc,
      ]),
    );
  }
  return out;
}

/** A friendly message for a docker compose key isb does not support. */
function dockerOnlyKey(doc: Tree): string | undefined {
  for (const k of Object.keys(doc)) {
    if (k in DOCKER_ONLY_TOP) return `\`${k}\` is not an isb key: ${DOCKER_ONLY_TOP[k]}`;
  }
  if (!isMap(doc.services)) return undefined;
  for (const [name, svc] of Object.entries(doc.services)) {
    if (!isMap(svc)) continue;
    const at = `service ${JSON.stringify(name)}: `;
    for (const k of Object.keys(svc)) {
      if (k in DOCKER_ONLY_SERVICE) {
        return `${at}\`${k}\` is not an isb key: ${DOCKER_ONLY_SERVICE[k]}`;
      }
    }
    if (isMap(svc.exec)) {
      for (const [k, to] of [["user", "user"], ["cwd", "working_dir"]]) {
        if (k! in svc.exec) return `${at}\`exec.${k}\` is not an isb key: use ${to} on the service`;
      }
    }
  }
  return undefined;
}

/** List forms of `environment`, `exec.env`, `labels` → maps (bare env keys from `lookup`). */
function normalizeLists(doc: Tree, lookup: Lookup): Tree {
  const toMap = (v: unknown, bare: (k: string) => string | undefined): unknown => {
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) return v;
    const m: Record<string, string> = {};
    for (const item of v as string[]) {
      const eq = item.indexOf("=");
      if (eq >= 0) m[item.slice(0, eq)] = item.slice(eq + 1);
      else {
        const b = bare(item);
        if (b !== undefined) m[item] = b;
      }
    }
    return m;
  };
  if (!isMap(doc.services)) return doc;
  const services: Tree = {};
  for (const [name, svc] of Object.entries(doc.services)) {
    if (!isMap(svc)) {
      services[name] = svc;
      continue;
    }
    const s: Tree = { ...svc };
    if ("environment" in s) s.environment = toMap(s.environment, lookup);
    if (isMap(s.exec) && "env" in s.exec) s.exec = { ...s.exec, env: toMap(s.exec.env, lookup) };
    if ("labels" in s) s.labels = toMap(s.labels, () => "");
    services[name] = s;
  }
  return { ...doc, services };
}

function parseYaml(path: string, text: string): unknown {
  let docs: unknown[];
  try {
    docs = loadAll(text, { filename: path, schema: CORE_SCHEMA.withTags(mergeTag) });
  } catch (e) {
    throw parseError(path, detailOf(e));
  }
  if (docs.length > 1) throw parseError(path, `expected one YAML document, found ${docs.length}`);
  return docs[0];
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
    const raw = parseYaml(f, text);
    if (raw === null || raw === undefined) continue;
    if (!isMap(raw)) throw parseError(f, "a compose file is a mapping (services:, volumes:, …)");
    let doc = stripExtensions(raw);
    const hint = dockerOnlyKey(doc);
    if (hint) throw parseError(f, hint);
    try {
      doc = interpolateTree(doc, lookup) as Tree;
    } catch (e) {
      throw parseError(f, detailOf(e));
    }
    doc = normalizeLists(doc, lookup);
    const r = ComposeFileSchema.safeParse(doc);
    if (!r.success) throw parseError(f, issuesMessage(r.error));
    merged = mergeFiles(merged, doc);
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
