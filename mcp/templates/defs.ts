/**
 * The shapes of template and tool definitions after validation, written out as interfaces
 * so they can be documented and named by callers. `schema.ts` holds the zod schemas that
 * produce them and proves at compile time that each schema's output is exactly the
 * interface here, so the two cannot drift. Optional fields carry `| undefined` because that
 * is what zod's output type says.
 *
 * @module
 */

/** A file placed into the guest at build time: exactly one of `content` and `source`. */
export interface FileDef {
  /** Absolute path of the file in the guest. */
  path: string;
  /** The file's text, given inline. */
  content?: string | undefined;
  /** A host file to copy, relative to the definition file's directory unless absolute. */
  source?: string | undefined;
  /** Octal permission bits as a quoted string, like `"0644"`. */
  mode?: string | undefined;
  /** The file's owner in the guest. */
  owner?: "root" | "agentuser" | undefined;
}

/** A git repository cloned into the guest as agentuser. */
export interface RepoDef {
  /** The clone URL. */
  url: string;
  /** Absolute path to clone into; the first repo's is the default working directory. */
  path: string;
  /** The branch to check out (default: the remote's default branch). */
  branch?: string | undefined;
}

/** A use of a tool in a template: its name, or its name with the tool's parameters. */
export type ToolRef = string | {
  /** The tool's name. */
  name: string;
  /** Values of the tool's declared parameters (e.g. `model`). */
  [param: string]: unknown;
};

/** Resource limits applied to instances of a template (Incus `limits.*`). */
export interface TemplateLimits {
  /** A number of CPUs, or a CPU set like `0-1` (`limits.cpu`). */
  cpu?: number | string | undefined;
  /** A size like `4GiB` or a percentage (`limits.memory`). */
  memory?: string | undefined;
  /** Most processes in the instance (`limits.processes`). */
  processes?: number | undefined;
}

/** A template definition as written (after validation), its name filled in. */
export interface TemplateDef {
  /** The template's name (default: the file's stem). */
  name: string;
  /** One line for humans and `list_templates`. */
  description?: string | undefined;
  /** The template this one is layered on; absent for a root template. */
  parent?: string | undefined;
  /** The Incus image a root template starts from. */
  image?: string | undefined;
  /** Whether instances are containers or VMs. */
  type?: "container" | "vm" | undefined;
  /** Debian packages installed with apt. */
  packages?: string[] | undefined;
  /** Tools whose packages, files and scripts are added to the build. */
  tools?: ToolRef[] | undefined;
  /** Shell scripts run as root after this layer's tools, files and repos. */
  run?: string | string[] | undefined;
  /** Shell scripts run as agentuser after `run`. */
  run_as_user?: string | string[] | undefined;
  /** Files placed into the guest. */
  files?: FileDef[] | undefined;
  /** Environment variables for the template's instances. */
  env?: Record<string, string | number | boolean> | undefined;
  /** The agent's working directory (default: the first repo's path). */
  workdir?: string | undefined;
  /** Git repositories cloned at build time. */
  repos?: RepoDef[] | undefined;
  /** Text added to the agent's environment primer. */
  agent_note?: string | undefined;
  /** The network instances get by default: open, through the proxy only, or none. */
  network?: "full" | "proxy-only" | "airgap" | undefined;
  /** Default resource limits of instances. */
  limits?: TemplateLimits | undefined;
  /** Who answers `ask` in its instances: an installed agent, optionally with its model. */
  summary_agent?:
    | "claude"
    | "codex"
    | "pi"
    | "opencode"
    | { agent: "claude" | "codex" | "pi" | "opencode"; model?: string | undefined }
    | undefined;
  /** The proxy account per namespace its instances use unless pinned (`claude: work`). */
  accounts?:
    | Partial<Record<"claude" | "anthropic" | "openai" | "codex" | "github", string>>
    | undefined;
}

/** A rule's value: text (may hold `${configKey}`), or a command printing it (user tools only). */
export type ToolRuleValueDef = string | { command: string[]; ttl?: string | number | undefined };

/** A credential rule a tool declares for the proxy. */
export type ToolProxyRuleDef =
  | { domain: string; bearer: ToolRuleValueDef }
  | { domain: string; header: string; value: ToolRuleValueDef }
  | { domain: string; basic: { user: string; password: ToolRuleValueDef } };

/** A package fetched from npm on the host and delivered into the guest. */
export interface NpmDef {
  /** The npm package name (scoped or not). */
  package: string;
  /** A version, range or dist-tag (default `latest`). */
  version?: string | undefined;
  /** True: installed with its dependencies on the host first; false: its tarball unpacked. */
  install?: boolean | undefined;
}

/** A parameter a tool accepts from templates (e.g. `model`). */
export interface ToolParamDef {
  /** What the parameter sets. */
  description?: string | undefined;
  /** The value used when a template gives none. */
  default?: string | undefined;
}

/** A tool definition as written (after validation), its name filled in. */
export interface ToolDef {
  /** The tool's name (default: the file's stem). */
  name: string;
  /** One line for humans. */
  description?: string | undefined;
  /** Tools that must be installed before this one. */
  requires?: string[] | undefined;
  /** Parameters templates may set, by lowercase name. */
  params?: Record<string, ToolParamDef> | undefined;
  /** Debian packages installed with apt. */
  packages?: string[] | undefined;
  /** npm packages fetched on the host and unpacked in the guest. */
  npm?: NpmDef[] | undefined;
  /** Whether the isx program itself is delivered into the guest. */
  program?: boolean | undefined;
  /** Shell scripts run as root, with the parameters in the environment. */
  run?: string | string[] | undefined;
  /** Shell scripts run as agentuser after `run`. */
  run_as_user?: string | string[] | undefined;
  /** Files placed into the guest. */
  files?: FileDef[] | undefined;
  /** Environment variables for instances that use the tool. */
  env?: Record<string, string | number | boolean> | undefined;
  /** Text added to the agent's environment primer. */
  agent_note?: string | undefined;
  /** Values the tool's `proxy:` rules name as `${key}` (secrets: only the proxy reads them). */
  configuration?: Record<string, string> | undefined;
  /** Credential rules for the proxy (honoured from user and search-path layers only). */
  proxy?: ToolProxyRuleDef[] | undefined;
}
