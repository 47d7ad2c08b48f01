/**
 * Registering a coordinator's agents against `https://mcp.isx.internal/mcp` (seed 002,
 * issue 20). On every start of an instance with an `mcp-caller` grant, each installed agent
 * that speaks MCP is told about the endpoint, naming the per-start secret by its path, never
 * by its value (the secret changes on every start; the registration does not):
 *
 * - Claude Code: `claude mcp add-json --scope user isx` with `type: http` and a
 *   `headersHelper`, a script of ours that prints the header from `/run/isx/instance-secret`
 *   when Claude Code connects (removed first, so a changed registration replaces the old).
 * - opencode: `mcp.isx` in `~/.config/opencode/opencode.json` (`type: remote`, `oauth: false`,
 *   header `{file:/run/isx/instance-secret}`, which opencode substitutes itself). The JSON is
 *   edited by Node as the agent: a file that is not JSON (a person's comments) is left alone
 *   and the edit is tried again on the next start; a symlinked config is written through its
 *   link, which stays.
 * - Codex is not registered: its streamable-HTTP servers take headers only as fixed values
 *   or from environment variables (`http_headers`, `env_http_headers`), so it would need the
 *   secret's value in its environment or config file. What it would take: a header read
 *   from a file, or a command, in Codex's MCP client.
 * - Pi has no MCP client.
 *
 * A marker (`~/.config/isx/mcp-client`) records that the instance was registered. A copy
 * of a coordinator (no grant: copies never inherit it) finds the marker on its first start
 * and removes every registration; the proxy refuses it regardless (proxy/mcp_endpoint/).
 * The script is constant text: nothing a client sends reaches it.
 *
 * @module
 */

import type { IncusClient } from "../../rpc/base.ts";
import { execRecorded, type GuestUser } from "../host/guest.ts";
import { AGENT_USER, GUEST_SECRET_PATH } from "../templates/steps.ts";

/** The endpoint coordinators' agents are registered against. */
export const MCP_ENDPOINT_URL = "https://mcp.isx.internal/mcp";

const AGENT: GuestUser = { uid: 1000, gid: 1000, home: `/home/${AGENT_USER}`, name: AGENT_USER };

/** What a registration run did, per agent (`registered`, `removed`, `absent`, `left: why`). */
export type RegistrationReport = Record<string, string>;

/** The Node program that edits opencode.json as the agent (`add|remove file url secretPath`). */
export const OPENCODE_EDIT: string = String.raw`
const fs = require("fs"), path = require("path");
const [mode, file, url, secretPath] = process.argv.slice(1);
const out = (s) => process.stdout.write(s + "\n");
let target = file;
try { target = fs.realpathSync(file); } catch (_) { /* missing: created below */ }
let cfg = {};
let text;
try { text = fs.readFileSync(target, "utf8"); } catch (_) { text = undefined; }
if (text !== undefined && text.trim() !== "") {
  try { cfg = JSON.parse(text); } catch (_) { out("left: not JSON"); process.exit(0); }
  if (!cfg || typeof cfg !== "object" || Array.isArray(cfg)) { out("left: not an object"); process.exit(0); }
}
if (mode === "add") {
  cfg.mcp = cfg.mcp && typeof cfg.mcp === "object" ? cfg.mcp : {};
  cfg.mcp.isx = { type: "remote", url, enabled: true, oauth: false,
    headers: { "X-Isx-Instance-Secret": "{file:" + secretPath + "}" } };
  if (!cfg.$schema) cfg.$schema = "https://opencode.ai/config.json";
} else {
  if (text === undefined || !cfg.mcp || !cfg.mcp.isx) { out("removed"); process.exit(0); }
  delete cfg.mcp.isx;
  if (Object.keys(cfg.mcp).length === 0) delete cfg.mcp;
}
fs.mkdirSync(path.dirname(target), { recursive: true });
const tmp = target + ".isx-tmp";
fs.writeFileSync(tmp, JSON.stringify(cfg, null, 2) + "\n", { mode: 0o600 });
fs.renameSync(tmp, target);
out(mode === "add" ? "registered" : "removed");
`;

/** The guest script: `$1` is add or remove; constants come in the environment. */
export const REGISTRATION_SCRIPT: string = String.raw`set -u
mode="$1"
mark="$HOME/.config/isx/mcp-client"
helper="$HOME/.config/isx/mcp-headers"
if [ "$mode" = remove ] && [ ! -e "$mark" ]; then exit 0; fi
mkdir -p "$HOME/.config/isx"
left=0
if command -v claude >/dev/null 2>&1; then
  claude mcp remove --scope user isx >/dev/null 2>&1 || true
  if [ "$mode" = add ]; then
    cat > "$helper" <<'HELPER'
#!/bin/sh
# prints the header Claude Code sends to isx mcp: the secret of this boot, read when it connects
printf '{"X-Isx-Instance-Secret":"%s"}' "$(cat ${GUEST_SECRET_PATH})"
HELPER
    chmod 0700 "$helper"
    if claude mcp add-json --scope user isx "$ISX_CLAUDE_JSON" >/dev/null 2>&1; then
      echo "claude=registered"
    else echo "claude=left: claude mcp add-json failed"; left=1; fi
  else rm -f "$helper"; echo "claude=removed"; fi
else echo "claude=absent"; fi
if command -v opencode >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  r=$(node -e "$ISX_OPENCODE_EDIT" "$mode" "$HOME/.config/opencode/opencode.json" "$ISX_MCP_URL" "$ISX_SECRET_PATH" 2>&1 | tail -n 1)
  echo "opencode=$r"
  case "$r" in registered|removed) ;; *) left=1 ;; esac
else echo "opencode=absent"; fi
if command -v codex >/dev/null 2>&1; then
  echo "codex=left: Codex sends MCP headers only from fixed values or environment variables"
fi
# the marker follows the registrations; whatever was left is tried again on the next start
if [ "$mode" = add ]; then touch "$mark"
elif [ "$left" = 0 ]; then rm -f "$mark"; fi
exit 0
`;

function parseReport(stdout: string): RegistrationReport {
  const out: RegistrationReport = {};
  for (const line of stdout.split("\n")) {
    const m = /^(claude|opencode|codex)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

/**
 * Registers (`coordinator`) or removes (a copy's first start) the endpoint for every agent
 * of a running instance; returns what each agent got. Never throws: a start is not undone
 * because an agent's config could not be edited (the next start tries again).
 */
export async function reconcileMcpClients(
  client: IncusClient,
  name: string,
  coordinator: boolean,
): Promise<RegistrationReport> {
  const claude = {
    type: "http",
    url: MCP_ENDPOINT_URL,
    headersHelper: `${AGENT.home}/.config/isx/mcp-headers`,
  };
  try {
    const r = await execRecorded(
      client,
      name,
      ["bash", "-lc", REGISTRATION_SCRIPT, "isx-mcp-client", coordinator ? "add" : "remove"],
      {
        step: `${coordinator ? "register" : "unregister"} the coordinator's agents of ${name}`,
        user: AGENT,
        env: {
          ISX_MCP_URL: MCP_ENDPOINT_URL,
          ISX_SECRET_PATH: GUEST_SECRET_PATH,
          ISX_CLAUDE_JSON: JSON.stringify(claude),
          ISX_OPENCODE_EDIT: OPENCODE_EDIT,
        },
      },
    );
    return r.exitCode === 0
      ? parseReport(r.stdout)
      : { all: `left: the script exited ${r.exitCode}: ${r.stderr.slice(-300)}` };
  } catch (e) {
    return { all: `left: ${(e as Error).message}` };
  }
}
