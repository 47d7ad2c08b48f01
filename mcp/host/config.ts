/**
 * The parts of `config.yaml` the host layer reads: `templates.searchPaths` (more definition
 * layers) and the bridge the proxy listens on (`proxy.bridge`, default `incusbr0`), plus
 * the text `isx init` writes when the file is missing. Other blocks (`proxy:` details,
 * `mcp:`) belong to their own readers; this one ignores what it does not know, and
 * validates only the keys it uses.
 *
 * @module
 */

import { IsbError, parseYaml } from "../../rpc/base.ts";

/** What the host layer takes from config.yaml. */
export interface HostConfig {
  /** Absolute search paths, in order. */
  searchPaths: string[];
  /** The Incus bridge whose gateway runs the proxy. */
  bridge: string;
  /** Extra intercepted domains (the proxy's), for guests' NO_PROXY. */
  domains: string[];
  /** The proxy's ops port (`proxy.ports.health`, default 18080), read on 127.0.0.1. */
  healthPort: number;
}

/** The proxy's ops address as the host layer reaches it (preflight, MCP server). */
export function proxyHealthUrl(c: Pick<HostConfig, "healthPort">): string {
  return `http://127.0.0.1:${c.healthPort}`;
}

/** The default bridge. */
export const DEFAULT_BRIDGE = "incusbr0";

function strings(file: string, field: string, v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
    throw new IsbError(
      "invalid",
      `config file "${file}": field "${field}": expected a list of strings`,
    );
  }
  return v as string[];
}

function expand(p: string, base: string, home: string): string {
  if (p === "~" || p.startsWith("~/")) return home + p.slice(1);
  return p.startsWith("/") ? p : `${base}/${p}`;
}

/** Reads `<configDir>/config.yaml`; a missing file gives the defaults. */
export function readHostConfig(configDir: string, home: string): HostConfig {
  const file = `${configDir}/config.yaml`;
  let text: string;
  try {
    text = Deno.readTextFileSync(file);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      return { searchPaths: [], bridge: DEFAULT_BRIDGE, domains: [], healthPort: 18080 };
    }
    throw new IsbError("io", `read config "${file}": ${(e as Error).message}`);
  }
  return parseHostConfig(file, text, { configDir, home });
}

/** Parses config.yaml text (pure). */
export function parseHostConfig(
  file: string,
  text: string,
  where: { configDir: string; home: string },
): HostConfig {
  let raw: unknown;
  try {
    // a document of comments only is an empty config
    raw = text.split("\n").every((l) => /^\s*(#.*)?$/.test(l)) ? {} : parseYaml(text) ?? {};
  } catch (e) {
    throw new IsbError("parse", `read config "${file}": ${(e as Error).message.split("\n")[0]}`);
  }
  if (typeof raw !== "object" || Array.isArray(raw) || raw === null) {
    throw new IsbError("invalid", `config file "${file}": expected a YAML mapping`);
  }
  const cfg = raw as Record<string, unknown>;
  const tpl = (cfg.templates ?? {}) as Record<string, unknown>;
  const proxy = (cfg.proxy ?? {}) as Record<string, unknown>;
  if (typeof tpl !== "object" || Array.isArray(tpl)) {
    throw new IsbError("invalid", `config file "${file}": field "templates": expected a mapping`);
  }
  const bridge = proxy.bridge ?? DEFAULT_BRIDGE;
  if (typeof bridge !== "string" || !/^[A-Za-z0-9_.-]{1,15}$/.test(bridge)) {
    throw new IsbError(
      "invalid",
      `config file "${file}": field "proxy.bridge": expected a network name`,
    );
  }
  const ports = (proxy.ports ?? {}) as Record<string, unknown>;
  const healthPort = ports.health ?? 18080;
  if (typeof healthPort !== "number" || !Number.isInteger(healthPort) || healthPort < 0) {
    throw new IsbError(
      "invalid",
      `config file "${file}": field "proxy.ports.health": expected a port`,
    );
  }
  return {
    healthPort,
    searchPaths: strings(file, "templates.searchPaths", tpl.searchPaths).map((p) =>
      expand(p, where.configDir, where.home)
    ),
    bridge,
    domains: strings(file, "proxy.domains", proxy.domains),
  };
}

/** The text `isx init` writes as config.yaml. */
export const CONFIG_TEMPLATE =
  `# isx configuration. \`isx init\` wrote this file once; it never overwrites it.

# Template and tool definitions are read from, in order: the built-ins, this
# directory's templates/ and tools/, each search path below (laid out the same way),
# and the working directory's .isx/ (project-local, never trusted by isx mcp).
templates:
  searchPaths: []

# The credential-injecting proxy listens on this Incus bridge's gateway.
proxy:
  bridge: ${DEFAULT_BRIDGE}

# isx mcp: what agents may do. Re-read on every call; isx mcp never writes it.
mcp:
  # The only templates agents may use (they must be built first: isx build <template>).
  templates: []
  # max-instances: 8            # per host user, across sessions, orphans included
  # max-concurrent-tasks: 8     # background commands + delegated agents
  # orphan-grace-hours: 24      # how long an orphaned instance lives
  # dormant-after-hours: 24
  # dormant-grace-hours: 168
  # delegate-permission-mode: bypassPermissions
  # summary-model: haiku
`;

/** The text `isx init` writes as credentials.yaml (mode 0600). */
export const CREDENTIALS_TEMPLATE =
  `# Real credentials, read only by the proxy (isx proxy). They never enter an
# instance: guests hold placeholders and the proxy swaps the real value in on the
# way out. Keep this file mode 0600 (the proxy refuses a wider mode).
#
# anthropic:
#   default: personal
#   accounts:
#     personal: { api_key: sk-ant-api03-... }     # or { oauth_token: sk-ant-oat01-... }
# openai:
#   accounts: { main: { api_key: sk-proj-... } }
# github:
#   accounts: { me: { token: ghp_... } }
# custom:
#   - { domain: api.example.com, header: X-Api-Key, value: ... }
`;
