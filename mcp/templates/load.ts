/**
 * Loading definitions from their layers: built-in → the user's config directory → the
 * configured search paths → the project-local `.isx/` of the working directory. A later
 * layer's definition replaces an earlier one of the same name, whole. Project-local
 * definitions are marked untrusted: isx mcp never uses them, and a template built from one
 * is stamped so.
 *
 * Each layer directory holds `templates/*.yaml` and `tools/*.yaml`, one definition per file
 * (the file's stem names it when `name` is absent). A file's `source:` entries are read here,
 * relative to the file, so the definition hash covers their bytes; each goes through the
 * one host-path check of isb rpc (`checkHostPath`): a source that is, or links into,
 * `~/.ssh`, `credentials.yaml`, the isx state or another credential store is refused, since
 * its bytes would be copied into every instance of the template.
 *
 * @module
 */

import { load as parseYaml } from "js-yaml";
import { IsbError } from "../../rpc/errors.ts";
import { checkHostPath, protectedHostPaths } from "../../rpc/host_paths.ts";
import { BUILTIN_TEMPLATES, BUILTIN_TOOLS } from "./builtin.ts";
import {
  builtinDef,
  type FileDef,
  parseTemplate,
  parseTool,
  type TemplateDef,
  type ToolDef,
} from "./schema.ts";

/** Where a definition came from. */
export type LayerKind = "builtin" | "user" | "search" | "project";

/** A file entry with its bytes resolved. */
export interface ResolvedFile {
  /** Absolute path in the guest. */
  path: string;
  /** The bytes. */
  data: Uint8Array;
  /** Permission bits. */
  mode: number;
  /** The owner. */
  owner: "root" | "agentuser";
}

/** A validated definition and where it came from. */
export interface Loaded<T> {
  /** The validated definition. */
  def: T;
  /** The file it was read from (`builtin:<name>` for built-ins). */
  file: string;
  /** The layer it came from. */
  layer: LayerKind;
  /** False for project-local definitions. */
  trusted: boolean;
  /** Its files with their bytes. */
  files: ResolvedFile[];
}

/** Every definition visible from one working directory. */
export interface Definitions {
  /** Template definitions by name. */
  templates: Map<string, Loaded<TemplateDef>>;
  /** Tool definitions by name. */
  tools: Map<string, Loaded<ToolDef>>;
  /** The layer directories that were read, in order. */
  layers: { kind: LayerKind; dir: string }[];
}

/** Where the layers are. */
export interface LayerDirs {
  /** The user's config directory (`~/.config/isx`). */
  configDir: string;
  /** Search paths from config.yaml, in order (absolute). */
  searchPaths?: readonly string[];
  /** The working directory; its `.isx/` is the project-local layer. Absent: no project layer. */
  cwd?: string;
  /** The user's home (`~` in `source:`; the credential stores under it are protected). */
  home?: string;
  /**
   * Host paths no `files[].source` may be or lead to (rpc/host_paths.ts):
   * added to the defaults (`~/.ssh` and the other credential stores, `credentials.yaml`,
   * the host's own secrets, devices).
   */
  protectedPaths?: readonly string[];
}

/** Canonical path of an existing path, undefined when missing (throws when not permitted). */
function realPathSync(path: string): string | undefined {
  try {
    return Deno.realPathSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
      return undefined;
    }
    throw e;
  }
}

function readText(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new IsbError("io", `read definition "${path}": ${(e as Error).message}`);
  }
}

function yamlFiles(dir: string): string[] {
  try {
    const names: string[] = [];
    for (const e of Deno.readDirSync(dir)) {
      if ((e.isFile || e.isSymlink) && /\.ya?ml$/.test(e.name)) names.push(e.name);
    }
    return names.sort().map((n) => `${dir}/${n}`);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw new IsbError("io", `read definitions directory "${dir}": ${(e as Error).message}`);
  }
}

/** Parses YAML text; a syntax error names the file and the line. */
export function parseYamlText(file: string, text: string): unknown {
  try {
    return parseYaml(text);
  } catch (e) {
    const msg = (e as Error).message.split("\n")[0] ?? String(e);
    throw new IsbError("parse", `read definition "${file}": ${msg}`);
  }
}

function stemOf(file: string): string {
  return (file.split("/").pop() ?? file).replace(/\.ya?ml$/, "");
}

function resolveFiles(
  file: string,
  files: readonly FileDef[] | undefined,
  baseDir: string | undefined,
  paths?: { home: string; roots: readonly string[] },
): ResolvedFile[] {
  return (files ?? []).map((f, i) => {
    let data: Uint8Array;
    if (f.content !== undefined) data = new TextEncoder().encode(f.content);
    else {
      if (baseDir === undefined) {
        throw new IsbError(
          "invalid",
          `definition "${file}": field "files[${i}].source": not allowed here`,
        );
      }
      // the one host-path check isb rpc uses: a link into ~/.ssh is read where it leads
      const src = checkHostPath(`definition "${file}": field "files[${i}].source"`, f.source!, {
        home: paths?.home ?? "/",
        baseDir,
        realPath: realPathSync,
        roots: paths?.roots ?? [],
        file: true,
        who: "isx",
      });
      try {
        data = Deno.readFileSync(src);
      } catch (e) {
        throw new IsbError(
          "invalid",
          `definition "${file}": field "files[${i}].source": cannot read "${src}": ${
            (e as Error).message
          }`,
        );
      }
    }
    return {
      path: f.path,
      data,
      mode: f.mode ? parseInt(f.mode, 8) : 0o644,
      owner: f.owner ?? "root",
    };
  });
}

function addLayer(
  defs: Definitions,
  kind: LayerKind,
  dir: string,
  paths: { home: string; roots: readonly string[] },
): void {
  const trusted = kind !== "project";
  defs.layers.push({ kind, dir });
  for (const file of yamlFiles(`${dir}/tools`)) {
    const text = readText(file);
    if (text === undefined) continue;
    const def = parseTool(file, parseYamlText(file, text), stemOf(file));
    if (!trusted) refuseProxyRules(file, def);
    const files = resolveFiles(file, def.files, file.replace(/\/[^/]*$/, ""), paths);
    defs.tools.set(def.name, { def, file, layer: kind, trusted, files });
  }
  for (const file of yamlFiles(`${dir}/templates`)) {
    const text = readText(file);
    if (text === undefined) continue;
    const def = parseTemplate(file, parseYamlText(file, text), stemOf(file));
    const files = resolveFiles(file, def.files, file.replace(/\/[^/]*$/, ""), paths);
    defs.templates.set(def.name, { def, file, layer: kind, trusted, files });
  }
}

/** A project-local tool may not hand the proxy credentials rules (docs/proxy.md). */
export function refuseProxyRules(file: string, def: ToolDef): void {
  if (def.proxy === undefined && def.configuration === undefined) return;
  throw new IsbError(
    "invalid",
    `tool file "${file}": fields "proxy" and "configuration" are read only from ~/.config/isx/tools and search paths, never from a project's .isx/: move the tool there`,
  );
}

/** The built-in layer alone (pure apart from nothing: no file access). */
export function builtinDefinitions(): Definitions {
  const defs: Definitions = { templates: new Map(), tools: new Map(), layers: [] };
  for (const [name, text] of Object.entries(BUILTIN_TOOLS)) {
    const file = `builtin:tools/${name}.yaml`;
    const def = builtinDef<ToolDef>(parseYamlText(file, text), name); // checked by builtin_test.ts
    defs.tools.set(name, {
      def,
      file,
      layer: "builtin",
      trusted: true,
      files: resolveFiles(file, def.files, undefined),
    });
  }
  for (const [name, text] of Object.entries(BUILTIN_TEMPLATES)) {
    const file = `builtin:templates/${name}.yaml`;
    const def = builtinDef<TemplateDef>(parseYamlText(file, text), name); // as above
    defs.templates.set(name, {
      def,
      file,
      layer: "builtin",
      trusted: true,
      files: resolveFiles(file, def.files, undefined),
    });
  }
  return defs;
}

/** Loads every layer in order; the first invalid file fails the whole load. */
export function loadDefinitions(dirs: LayerDirs): Definitions {
  const defs = builtinDefinitions();
  const home = dirs.home ?? "/root";
  const roots = protectedHostPaths({
    env: { HOME: home },
    definitions: true,
    extra: [`${dirs.configDir}/credentials.yaml`, ...(dirs.protectedPaths ?? [])],
  });
  const paths = { home, roots };
  addLayer(defs, "user", dirs.configDir, paths);
  for (const p of dirs.searchPaths ?? []) addLayer(defs, "search", p, paths);
  if (dirs.cwd !== undefined) addLayer(defs, "project", `${dirs.cwd}/.isx`, paths);
  return defs;
}
