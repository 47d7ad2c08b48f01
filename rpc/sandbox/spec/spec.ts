/**
 * The spec format: zod schemas for a sandbox spec (a compose `services.<svc>` object) and
 * the compose file around it (isb-rpc.md §7), their types, their normalised serialisation,
 * and the JSON Schema the `schema` method returns.
 *
 * Every object is strict, so a typo is an error naming the field rather than a silently
 * ignored setting; scalars are lenient because interpolation produces strings. Parsing
 * normalises as it goes: mounts become their long form minus defaults, `depends_on` a map,
 * `environment`/`labels` maps, `exec.login: false` disappears. Only ports keep an internal
 * model, which {@link serializeSpec} turns back into docker's mapping or the proxy form.
 *
 * A bare spec may also call `container_name` `name` (the rpc docs' example does); a compose
 * file may not (`load.ts` rejects a service `name` with a hint first).
 *
 * @module
 */

import * as z from "zod";
import { IsbError } from "../../errors.ts";
import { Egress, type EgressSecretSpec, type EgressSpec } from "./egress.ts";
import { Mount, type MountSpec } from "./mounts.ts";
import {
  Command,
  environment,
  type EnvValue,
  ExecDefaultsSchema,
  ExecSpec,
  Idmap,
  type IdmapMode,
  type IdmapSpec,
  Ready,
  type ReadyCheck,
} from "./parts.ts";
import {
  type Dependency,
  DependsOn,
  Deploy,
  type DeploySpec,
  Domain,
  type DomainSpec,
  Healthcheck,
  type HealthcheckSpec,
  Restart,
  type SecretRef,
  SecretRefSchema,
  type UpdateConfigSpec,
} from "./service.ts";
import { Port, type PortSpec, portToJson } from "./ports.ts";
import { Bool, IntOrString, mapOrList, StringMap } from "./scalars.ts";

export type { EgressSpec, EnvValue, IdmapSpec, MountSpec, PortSpec, ReadyCheck, SecretRef };
export type { Dependency, DeploySpec, DomainSpec, HealthcheckSpec, UpdateConfigSpec };
export type { EgressSecretSpec, IdmapMode };
export { ExecDefaultsSchema, Port as PortSchema, Ready as ReadyCheckSchema };
export type { ExecDefaults } from "./parts.ts";
export type { SandboxSpec } from "./_type.ts";
import type { SandboxSpec } from "./_type.ts";

/** Keys dropped from the output when empty (they serialise only when they say something). */
const DROP_EMPTY = [
  "labels",
  "environment",
  "volumes",
  "ports",
  "exec",
  "depends_on",
  "domains",
  "secrets",
  "raw_config",
  "raw_devices",
];

/** Removes `undefined` values and the empty collections listed in `dropEmpty`. */
function clean<T>(o: Record<string, unknown>, dropEmpty: string[] = []): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (v === undefined) continue;
    if (
      dropEmpty.includes(k) && v !== null && typeof v === "object" && Object.keys(v).length === 0
    ) {
      continue;
    }
    out[k] = v;
  }
  return out as T;
}

const SandboxSpecObject = z.strictObject({
  container_name: z.string().optional().describe(
    "incus instance name: at most 63 of [A-Za-z0-9-], starting with a letter",
  ),
  image: z.string().default("").describe(
    "Local alias or fingerprint, or remote:alias (images:, ubuntu:, docker:, ghcr:, …)",
  ),
  type: z.enum(["container", "virtual-machine", "vm"]).optional()
    .transform((t) =>
      t === "vm" || t === "virtual-machine" ? "virtual-machine" as const : undefined
    ),
  storage: z.string().optional().describe("Root disk pool; `auto` by default"),
  cpus: IntOrString.optional(),
  cpuset: IntOrString.optional(),
  mem_limit: IntOrString.optional(),
  privileged: Bool.optional(),
  idmap: Idmap.optional(),
  incus_profiles: z.array(z.string()).optional(),
  labels: mapOrList("labels", () => "").optional(),
  environment: environment().optional(),
  volumes: z.array(Mount).optional(),
  ports: z.array(Port).optional(),
  ready: z.array(Ready).optional(),
  ready_timeout: IntOrString.optional(),
  user: IntOrString.optional(),
  working_dir: z.string().optional(),
  exec: ExecSpec.optional(),
  command: Command.optional(),
  entrypoint: Command.optional(),
  restart: Restart.optional(),
  healthcheck: Healthcheck.transform((h) => clean<HealthcheckSpec>(h)).optional(),
  depends_on: DependsOn.optional(),
  deploy: Deploy.optional(),
  domains: z.array(Domain).optional(),
  secrets: z.array(SecretRefSchema).optional(),
  egress: Egress.optional(),
  raw_config: StringMap.optional(),
  raw_devices: z.record(z.string(), StringMap).optional(),
});

/** The sandbox spec schema (registered as `SandboxSpec` in the JSON Schema's `$defs`). */
export const SandboxSpecSchema = z.preprocess(
  (v, ctx) => {
    // `name` is accepted as `container_name` in a bare spec.
    if (v && typeof v === "object" && !Array.isArray(v) && "name" in v) {
      const { name, ...rest } = v as Record<string, unknown>;
      if ("container_name" in rest) {
        ctx.addIssue({ code: "custom", message: "name and container_name are the same field" });
        return z.NEVER;
      }
      return { ...rest, container_name: name };
    }
    return v;
  },
  SandboxSpecObject.transform((s) => clean<SandboxSpec>(s, DROP_EMPTY)),
).meta({ id: "SandboxSpec", description: "Everything about one sandbox: a compose service" });

/** A named custom storage volume (top-level `volumes:`). */
export const NamedVolumeSpecSchema = z.strictObject({
  name: z.string().optional().describe("incus volume name (default <project>_<key>)"),
  pool: z.string().optional(),
  config: StringMap.optional(),
  external: Bool.optional(),
}).nullable().transform((v) =>
  clean<NamedVolumeSpec>({ ...v, external: v?.external || undefined }, ["config"])
).meta({ id: "NamedVolumeSpec" });

/** A named custom storage volume. */
export interface NamedVolumeSpec {
  /** The Incus volume name (default `<project>_<key>`). */
  name?: string;
  /** The storage pool (default: the sandbox's root pool). */
  pool?: string;
  /** Volume config set when isb creates it. */
  config?: Record<string, string>;
  /** It must already exist: isb neither creates nor removes it. */
  external?: true;
}

/** Where a secret's value comes from (exactly one source; see `validateSecretDef`). */
export const SecretDefSchema = z.strictObject({
  file: z.string().optional(),
  environment: z.string().optional(),
  external: Bool.optional(),
  name: z.string().optional(),
  age: z.string().optional(),
  driver: z.string().optional(),
  refresh: IntOrString.optional(),
}).transform((d) => clean<SecretDef>({ ...d, external: d.external || undefined }))
  .meta({ id: "SecretDef" });

/** A top-level secret definition. */
export interface SecretDef {
  file?: string;
  environment?: string;
  external?: true;
  name?: string;
  age?: string;
  driver?: string;
  refresh?: string;
}

/** The compose file (root of the JSON Schema, titled `ComposeFile`). */
export const ComposeFileSchema = z.strictObject({
  name: z.string().optional().describe("Project name (default: the first file's directory)"),
  incus_project: z.string().optional().describe("incus project to operate in"),
  volumes: z.record(z.string(), NamedVolumeSpecSchema).optional(),
  services: z.record(z.string(), SandboxSpecSchema).optional(),
  secrets: z.record(z.string(), SecretDefSchema).optional(),
}).transform((f) => {
  const out = clean<ComposeFile>(f, ["volumes", "secrets"]);
  out.services = f.services ?? {};
  return out;
}).meta({ title: "ComposeFile", description: "An isb compose file (isb.yaml)" });

/** A parsed compose file. */
export interface ComposeFile {
  name?: string;
  incus_project?: string;
  volumes?: Record<string, NamedVolumeSpec>;
  services: Record<string, SandboxSpec>;
  secrets?: Record<string, SecretDef>;
}

function pathText(path: readonly PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : `${out ? "." : ""}${String(p)}`;
  return out;
}

/** Renders zod issues as one message naming each offending field (under `root`, if given). */
export function issuesMessage(error: z.ZodError, root?: string): string {
  const parts = error.issues.map((issue) => {
    const path = pathText([...(root ? [root] : []), ...issue.path]);
    if (issue.code === "unrecognized_keys") {
      const keys = issue.keys.map((k) => `\`${k}\``).join(", ");
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${keys}${path ? ` in ${path}` : ""}`;
    }
    return path ? `${path}: ${issue.message}` : issue.message;
  });
  return parts.join("; ");
}

/** Parses a bare sandbox spec; bad input is `invalid` `params: <message naming the field>`. */
export function parseSpec(raw: unknown): SandboxSpec {
  const r = SandboxSpecSchema.safeParse(raw);
  if (!r.success) throw new IsbError("invalid", `params: ${issuesMessage(r.error, "spec")}`);
  return r.data;
}

/** A spec in its serialised (normalised) form, ready for JSON. */
export function serializeSpec(spec: SandboxSpec): Record<string, unknown> {
  const { ports, ...rest } = spec;
  return ports ? { ...rest, ports: ports.map(portToJson) } : { ...rest };
}

/** A compose file in its serialised (normalised) form, ready for JSON. */
export function serializeComposeFile(file: ComposeFile): Record<string, unknown> {
  const services = Object.fromEntries(
    Object.entries(file.services).map(([k, s]) => [k, serializeSpec(s)]),
  );
  return { ...file, services };
}

let schemaCache: Record<string, unknown> | undefined;

/** The JSON Schema (draft 2020-12) of the compose file, `SandboxSpec` under `$defs`. */
export function specJsonSchema(): Record<string, unknown> {
  schemaCache ??= z.toJSONSchema(ComposeFileSchema, {
    io: "input",
    target: "draft-2020-12",
  }) as Record<string, unknown>;
  return structuredClone(schemaCache);
}
