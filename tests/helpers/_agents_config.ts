/**
 * The agents lab's guest configuration (agents_lab.ts): the tasks' working directory (a git
 * repository, so get_diff has something to compare) and each agent pointed at the lab's test
 * names: Codex and Pi by their config files, opencode by its JSON (merged over the
 * template's); Claude needs none (ANTHROPIC_BASE_URL in the run's environment). Apart from
 * the lab because it is what the agents read, not how the lab reaches the instance. The
 * login profile carries the same endpoints for what isx mcp starts through a login shell.
 *
 * @module
 */

import { equal } from "node:assert/strict";
import { shQuote } from "../../mcp/tasks/script.ts";

/** Where the lab's endpoints go for login shells (runs and people started by isx mcp). */
export const LOGIN_PROFILE = "/etc/profile.d/zz-isx-test.sh";

/** A run's environment as profile exports, except what a login sets itself. */
export function loginProfile(env: Record<string, string>): string {
  return Object.entries(env).filter(([k]) => !["HOME", "USER", "PATH"].includes(k))
    .map(([k, v]) => `export ${k}=${shQuote(v)}\n`).join("") + `export no_proxy="$NO_PROXY"\n`;
}

/** Writes the agents' configuration and the project as the agent user. */
export async function configureAgents(o: {
  /** The agent user's home. */
  home: string;
  /** The tasks' working directory. */
  project: string;
  /** The Anthropic test origin (`https://name:port`). */
  anthropic: string;
  /** The OpenAI test base URL (`https://name:port/v1`). */
  openai: string;
  /** Runs a script as the agent user. */
  user(script: string): Promise<{ exitCode: number; stderr: string }>;
  /** Writes a file as the agent user (mode 600). */
  push(path: string, text: string): Promise<void>;
  /** Reads a guest file. */
  pull(path: string): Promise<Uint8Array>;
}): Promise<void> {
  const a = o.anthropic;
  const h = o.home;
  await o.user(`mkdir -p ${h}/.codex ${h}/.pi/agent ${h}/.config/opencode`);
  const git = await o.user(
    `mkdir -p ${o.project} && cd ${o.project} && git init -q && echo base > README && git add . && ` +
      `git -c user.name=t -c user.email=t@t commit -qm base`,
  );
  equal(git.exitCode, 0, git.stderr);
  await o.push(
    `${h}/.codex/config.toml`,
    `model = "gpt-5.5"\nmodel_provider = "isxtest"\ncheck_for_update_on_startup = false\n` +
      `[analytics]\nenabled = false\n[features]\nplugins = false\n` +
      `[model_providers.isxtest]\nname = "isxtest"\nbase_url = "${o.openai}"\n` +
      `env_key = "OPENAI_API_KEY"\nwire_api = "responses"\nsupports_websockets = true\n`,
  );
  await o.push(
    `${h}/.pi/agent/models.json`,
    JSON.stringify({ providers: { anthropic: { baseUrl: a } } }) + "\n",
  );
  let oc: Record<string, unknown> = {};
  try {
    oc = JSON.parse(new TextDecoder().decode(await o.pull(`${h}/.config/opencode/opencode.json`)));
  } catch { /* the template may have none */ }
  oc.autoupdate = false;
  oc.model ??= "anthropic/claude-sonnet-4-6";
  oc.provider = { anthropic: { options: { baseURL: `${a}/v1` } } };
  await o.push(`${h}/.config/opencode/opencode.json`, JSON.stringify(oc, null, 2) + "\n");
}
