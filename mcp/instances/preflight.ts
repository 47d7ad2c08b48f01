/**
 * The preflight of `isx branch`, `isx start`, `isx shell` and the MCP server's
 * `create_instance`/`start_instance` (shared/spec/isx-mcp.md §2.2, §2.16, §7.H): an
 * instance is only useful if the proxy answers, runs this build with the config on disk,
 * and holds a credential for each agent the template carries. Each refusal is
 * `IsbError("not_ready")` with `data.preflight` (a stable reason) and `data.fix` (the
 * command that fixes it), so no one is left with an instance whose every HTTPS call fails.
 *
 * The judgement ({@link judgePreflight}) is pure; {@link preflight} reads `/health` and
 * judges. A CA mismatch is not refused: the caller repairs the guest (ca_trust.ts).
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";
import {
  type HealthRead,
  type OwnBuild,
  type ProxyHealth,
  readProxyHealth,
  versionDrift,
} from "../host/proxy_check.ts";
import type { Definitions } from "../templates/load.ts";
import { resolveChain } from "../templates/resolve.ts";

/** Why a preflight refused (stable; also `data.preflight` of the error). */
export type PreflightReason =
  | "proxy_not_running"
  | "proxy_unknown"
  | "proxy_version_drift"
  | "proxy_config_drift"
  | "missing_credential";

/** A credential namespace a template's tool needs. */
export interface CredentialNeed {
  /** The tool (claude, codex, pi, opencode). */
  tool: string;
  /** The credentials.yaml namespace (anthropic, openai). */
  namespace: string;
}

const PROVIDERS = new Set(["anthropic", "openai"]);
const provider = (p: string | undefined) => (p && PROVIDERS.has(p) ? p : undefined);

/** Which namespace each built-in agent needs (pi and opencode: by their provider param). */
const NEEDS: Record<string, (params: Record<string, string>) => string | undefined> = {
  claude: () => "anthropic",
  codex: () => "openai",
  pi: (p) => provider(p.provider),
  opencode: (p) => provider(p.model?.split("/")[0]),
};

/** The credentials the tools of a template's chain need (none if it is not defined). */
export function credentialNeeds(defs: Definitions, template: string): CredentialNeed[] {
  if (!defs.templates.has(template)) return [];
  const out: CredentialNeed[] = [];
  for (const link of resolveChain(defs, template)) {
    for (const u of link.tools) {
      const tool = u.tool.def.name;
      const namespace = NEEDS[tool]?.(u.params);
      if (namespace && !out.some((n) => n.namespace === namespace && n.tool === tool)) {
        out.push({ tool, namespace });
      }
    }
  }
  return out;
}

/** What {@link preflight} needs. */
export interface PreflightOptions {
  /** The proxy's ops address, e.g. `http://127.0.0.1:18080`. */
  healthUrl: string;
  /** This program's build. */
  own: OwnBuild;
  /** What the command is, for messages ("branch x from tpl-y"). */
  action: string;
  /** Credentials the template's tools need. */
  needs?: readonly CredentialNeed[];
}

/** What a passed preflight found. */
export interface PreflightResult {
  /** The proxy's `/health`. */
  health: ProxyHealth;
  /** Things worth saying that do not block (futile version drift, legacy proxy). */
  warnings: string[];
}

function refuse(reason: PreflightReason, action: string, why: string, fix: string): never {
  throw new IsbError("not_ready", `${action}: ${why}: ${fix} (or --no-preflight)`, {
    data: { preflight: reason, fix },
  });
}

/** Judges a `/health` read (pure); throws the refusal or returns the result. */
export function judgePreflight(read: HealthRead, opts: PreflightOptions): PreflightResult {
  const { action } = opts;
  if (read.kind === "down") {
    refuse(
      "proxy_not_running",
      action,
      `the proxy does not answer at ${opts.healthUrl}, so every HTTPS call of the instance would fail`,
      "isx proxy start",
    );
  }
  if (read.kind === "foreign") {
    refuse(
      "proxy_unknown",
      action,
      `something answers at ${opts.healthUrl}, but not like isx proxy (${read.detail})`,
      "see isx proxy status",
    );
  }
  const h = read.health;
  const warnings: string[] = [];
  // A proxy that reloads credentials live applies a credentials change itself: only what
  // needs a restart (its other config, the CA) is drift; an older proxy's credentials are.
  const restartFiles = (h.configDriftedFiles ?? []).filter((f) =>
    !(h.credentials && f.endsWith("/credentials.yaml"))
  );
  if (h.configDrifted && (restartFiles.length || !h.credentials)) {
    const files = restartFiles.join(", ") || "its config";
    refuse(
      "proxy_config_drift",
      action,
      `${files} changed since the proxy started; it still uses the old`,
      "isx proxy restart",
    );
  }
  const drift = versionDrift(h, opts.own);
  if (drift.kind === "restart") {
    refuse("proxy_version_drift", action, drift.detail, "isx proxy restart");
  }
  if (drift.kind === "futile" || drift.kind === "legacy") warnings.push(drift.detail);
  const missing = new Set(h.missingCredentials ?? []);
  for (const n of opts.needs ?? []) {
    if (!missing.has(n.namespace)) continue;
    refuse(
      "missing_credential",
      action,
      `its tool ${n.tool} needs a credential the proxy does not have`,
      `add an account under "${n.namespace}:" in ~/.config/isx/credentials.yaml ` +
        `(the commented "# ${n.namespace}:" lines show the shape)` +
        (h.credentials ? "; the proxy applies it within 2 s" : ", then isx proxy restart"),
    );
  }
  if (h.credentials?.error) {
    warnings.push(
      `the proxy keeps its previous credentials: ${h.credentials.error} (see isx proxy status)`,
    );
  }
  return { health: h, warnings };
}

/** Reads the proxy's `/health` and judges it; throws the refusal. */
export async function preflight(opts: PreflightOptions): Promise<PreflightResult> {
  return judgePreflight(await readProxyHealth(opts.healthUrl), opts);
}
