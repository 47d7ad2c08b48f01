/**
 * Which templates agents may use and what `list_templates` says of them: approved in the
 * mcp settings, defined only by trusted layers (never a project-local `.isx/`), built or
 * not, stale when the built stamps no longer match the definition, the delegate
 * descriptors of seed 000 for the agents the template's chain installs, and the summary
 * agent that answers `ask` there (the template's `summary_agent`, else the default delegate
 * agent).
 *
 * @module
 */

import { readStamps, STAMP } from "../host/stamps.ts";
import type { Definitions } from "../templates/load.ts";
import type { TemplateDef } from "../templates/defs.ts";
import { resolveChain } from "../templates/resolve.ts";
import { RefusalError } from "../errors.ts";
import type { McpConfig } from "./config.ts";

/** The agents, in `default_delegate_agent` order. */
export const AGENTS = ["claude", "codex", "pi", "opencode"] as const;

const PERMISSION: Record<string, Record<string, string>> = {
  claude: { permission_mode: "bypassPermissions" },
  codex: { permission_mode: "danger-full-access", approval_policy: "never" },
  pi: { permission_mode: "full-access" },
  opencode: { permission_mode: "full-access" },
};

/** What a template offers to agents. */
export interface TemplateFacts {
  /** Its name. */
  template: string;
  /** Its one-line description. */
  description?: string;
  /** Every tool of the chain. */
  tools: string[];
  /** Working directory of its instances. */
  workdir?: string;
  /** Descriptors per installed agent. */
  delegate_agents: Record<string, unknown>[];
  /** Who answers `ask`, when the template has a usable summary agent. */
  summary_agent?: { agent: (typeof AGENTS)[number]; model?: string };
  /** Why it has none (for the refusal and list_templates' note). */
  summary_problem?: string;
}

/** The model the summary agent gets when the template names none: Claude's cheap alias. */
export const SUMMARY_MODEL_DEFAULT: Partial<Record<(typeof AGENTS)[number], string>> = {
  claude: "haiku",
};

/**
 * The summary agent of a chain: the nearest layer's `summary_agent` when that agent is
 * installed, else (none named) the default delegate agent; with the model it names, else
 * {@link SUMMARY_MODEL_DEFAULT}'s. Pure.
 */
export function summaryAgentOf(
  named: TemplateDef["summary_agent"],
  installed: readonly string[],
): Pick<TemplateFacts, "summary_agent" | "summary_problem"> {
  const want = typeof named === "string" ? { agent: named } : named;
  const agent = want?.agent ?? AGENTS.find((a) => installed.includes(a));
  if (!agent) {
    return { summary_problem: "it installs none of claude, codex, pi, opencode" };
  }
  if (!installed.includes(agent)) {
    return {
      summary_problem: `its summary_agent ${agent} is not installed (installed: ${
        installed.join(", ") || "none"
      })`,
    };
  }
  const model = want?.model ?? SUMMARY_MODEL_DEFAULT[agent];
  return { summary_agent: { agent, ...(model ? { model } : {}) } };
}

/** The approved, trusted template `name`, or a refusal saying why not. */
export function approvedTemplate(cfg: McpConfig, defs: Definitions, name: string): TemplateFacts {
  if (!cfg.templates.includes(name)) {
    throw new RefusalError(
      "not_approved",
      `template "${name}" is not approved for agents; only the user can approve it under "templates" in ${cfg.source} (approved: ${
        cfg.templates.join(", ") || "none"
      })`,
    );
  }
  const def = defs.templates.get(name);
  if (!def) {
    throw new RefusalError(
      "not_approved",
      `template "${name}" is approved but not defined; ask the user to define it or fix ${cfg.source}`,
    );
  }
  let chain;
  try {
    chain = resolveChain(defs, name);
  } catch (e) {
    throw new RefusalError("not_approved", `template "${name}": ${(e as Error).message}`);
  }
  if (chain.some((l) => !l.template.trusted)) {
    throw new RefusalError(
      "not_approved",
      `template "${name}" comes from a project-local definition, which isx mcp never uses`,
    );
  }
  const leaf = chain[chain.length - 1]!;
  const agents: Record<string, unknown>[] = [];
  for (const agent of AGENTS) {
    if (!leaf.allTools.includes(agent)) continue;
    let model: string | undefined;
    for (const l of [...chain].reverse()) {
      const use = l.tools.find((t) => t.tool.def.name === agent);
      if (use?.params.model) {
        model = use.params.model;
        break;
      }
    }
    agents.push({
      agent,
      ...(model ? { model } : {}),
      supports_model_preflight: agent === "claude",
      ...PERMISSION[agent],
    });
  }
  let workdir: string | undefined;
  let named: TemplateDef["summary_agent"];
  for (const l of chain) {
    workdir = l.template.def.repos?.[0]?.path ?? workdir;
    named = l.template.def.summary_agent ?? named;
  }
  return {
    template: name,
    ...(def.def.description ? { description: def.def.description } : {}),
    tools: leaf.allTools,
    ...(workdir ? { workdir } : {}),
    delegate_agents: agents,
    ...summaryAgentOf(named, agents.map((a) => String(a.agent))),
  };
}

/** Built and stale flags from the template instance's config (undefined: not built). */
export function builtState(
  defs: Definitions,
  name: string,
  config: Record<string, string> | undefined,
): { built: boolean; stale: boolean } {
  const s = readStamps(config);
  if (!config || s[STAMP.type] !== "base") return { built: false, stale: false };
  const chain = resolveChain(defs, name);
  return { built: true, stale: s[STAMP.definitionHash] !== chain[chain.length - 1]!.hash };
}
