/**
 * The user's word on what agents may do through `isx mcp`: `mcp.yaml` in the isx config
 * directory (seed 000), or, when that file is absent, the `mcp:` block of `config.yaml`
 * that `isx init` writes. Re-read on every tool call so a person's edit takes effect at once;
 * the server never writes it (its permission mode cannot). Negative numbers clamp to 0.
 *
 * @module
 */

import { load as parseYaml } from "js-yaml";
import { RefusalError } from "../errors.ts";

/** The `mcp` settings. */
export interface McpConfig {
  /** The only templates agents may use. */
  templates: string[];
  /** Instances per host user across sessions, orphans included, kept ones excluded. */
  maxInstances: number;
  /** Background commands and agents per host user across sessions. */
  maxConcurrentTasks: number;
  /** How long an orphan lives before the sweep may destroy it. */
  orphanGraceHours: number;
  /** Quiet time before an orphan kept only by an agent is stopped. */
  dormantAfterHours: number;
  /** A dormant orphan's lifetime after its stop. */
  dormantGraceHours: number;
  /** `warm-pool:` template → how many started, unclaimed members to keep (mcp/pool/). */
  warmPool: Record<string, number>;
  /** The file it came from (for messages). */
  source: string;
}

/** The most members one template's pool may ask for. */
export const WARM_POOL_MAX = 16;

/** The defaults (§4.5). */
export const MCP_DEFAULTS: Omit<McpConfig, "source"> = {
  templates: [],
  warmPool: {},
  maxInstances: 8,
  maxConcurrentTasks: 8,
  orphanGraceHours: 24,
  dormantAfterHours: 24,
  dormantGraceHours: 168,
};

const NUMBERS: Record<string, keyof McpConfig> = {
  "max-instances": "maxInstances",
  "max-concurrent-tasks": "maxConcurrentTasks",
  "orphan-grace-hours": "orphanGraceHours",
  "dormant-after-hours": "dormantAfterHours",
  "dormant-grace-hours": "dormantGraceHours",
};

function bad(source: string, what: string): RefusalError {
  return new RefusalError(
    "refused",
    `the isx mcp settings in "${source}" are not valid: ${what}; ask the user to fix the file`,
  );
}

/** Parses the settings mapping (pure); unknown keys are left to other readers. */
export function parseMcpConfig(source: string, raw: unknown): McpConfig {
  const out: McpConfig = { ...MCP_DEFAULTS, templates: [], warmPool: {}, source };
  if (raw === undefined || raw === null) return out;
  if (typeof raw !== "object" || Array.isArray(raw)) throw bad(source, "expected a mapping");
  const m = raw as Record<string, unknown>;
  if (m.templates !== undefined && m.templates !== null) {
    if (!Array.isArray(m.templates) || m.templates.some((t) => typeof t !== "string")) {
      throw bad(source, '"templates" must be a list of template names');
    }
    out.templates = m.templates as string[];
  }
  for (const [key, field] of Object.entries(NUMBERS)) {
    const v = m[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw bad(source, `"${key}" must be a number`);
    }
    (out as unknown as Record<string, number>)[field] = Math.max(0, v);
  }
  out.warmPool = parseWarmPool(source, m["warm-pool"], out.templates);
  return out;
}

/**
 * `warm-pool:` (pure): a mapping of approved templates to whole counts 0..16; default none.
 * A template that is not in `templates` is an error, not ignored: a pool of a template agents
 * may not use would only burn memory.
 */
export function parseWarmPool(
  source: string,
  raw: unknown,
  templates: readonly string[],
): Record<string, number> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw bad(source, '"warm-pool" must be a mapping of template to count ({tpl-minimal: 2})');
  }
  const out: Record<string, number> = {};
  for (const [tpl, n] of Object.entries(raw as Record<string, unknown>)) {
    if (!templates.includes(tpl)) {
      throw bad(source, `"warm-pool": template "${tpl}" is not in "templates"`);
    }
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > WARM_POOL_MAX) {
      throw bad(source, `"warm-pool": "${tpl}" must be a whole number from 0 to ${WARM_POOL_MAX}`);
    }
    if (n > 0) out[tpl] = n;
  }
  return out;
}

function readYaml(path: string): unknown | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw new RefusalError("unavailable", `read "${path}": ${(e as Error).message}`);
  }
  try {
    return parseYaml(text) ?? {};
  } catch (e) {
    throw bad(path, (e as Error).message.split("\n")[0]!);
  }
}

/** Reads `mcp.yaml`, else config.yaml's `mcp:` block, else the defaults. */
export function readMcpConfig(configDir: string): McpConfig {
  const own = `${configDir}/mcp.yaml`;
  const mine = readYaml(own);
  if (mine !== undefined) return parseMcpConfig(own, mine);
  const main = `${configDir}/config.yaml`;
  const cfg = readYaml(main);
  const block = cfg && typeof cfg === "object" ? (cfg as Record<string, unknown>).mcp : undefined;
  return parseMcpConfig(main, block);
}
