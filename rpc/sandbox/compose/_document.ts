/**
 * One compose file's text → the tree that is merged (isb-rpc.md §12.1–12.4), pure: YAML
 * (anchors, aliases, `<<` merge keys) → drop `x-*` and `version` → reject docker-only keys
 * with a hint → interpolate → list forms to maps → validate the file alone. Every failure
 * is `parse` with `data: {path}` and the message `<path>: <detail>`.
 *
 * @module
 */

import { CORE_SCHEMA, loadAll, mergeTag } from "js-yaml";
import { IsbError } from "../../errors.ts";
import { ComposeFileSchema, issuesMessage } from "../spec/spec.ts";
import { interpolateTree, type Lookup } from "./_interpolate.ts";

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

/** A YAML mapping. */
export type Tree = Record<string, unknown>;

function isMap(v: unknown): v is Tree {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The loader's error: `parse`, naming the file. */
export function parseError(path: string, detail: string): IsbError {
  return new IsbError("parse", `${path}: ${detail}`, { data: { path } });
}

/** An exception's message, without interpolation's prefix. */
export function detailOf(e: unknown): string {
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

/** One YAML document (anchors, aliases and `<<` merge keys resolved). */
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

/** File `path`'s tree, ready to merge; undefined for an empty file. Throws `parse`. */
export function fileTree(path: string, text: string, lookup: Lookup): Tree | undefined {
  const raw = parseYaml(path, text);
  if (raw === null || raw === undefined) return undefined;
  if (!isMap(raw)) throw parseError(path, "a compose file is a mapping (services:, volumes:, …)");
  let doc = stripExtensions(raw);
  const hint = dockerOnlyKey(doc);
  if (hint) throw parseError(path, hint);
  try {
    doc = interpolateTree(doc, lookup) as Tree;
  } catch (e) {
    throw parseError(path, detailOf(e));
  }
  doc = normalizeLists(doc, lookup);
  const r = ComposeFileSchema.safeParse(doc);
  if (!r.success) throw parseError(path, issuesMessage(r.error));
  return doc;
}
