/**
 * The coordinator grant (shared/spec/isx-mcp.md §4.1, §4.2, §10; seed 002): an instance
 * branched or started with `--mcp-client` carries the stamp `mcp-caller`, 32 random hex
 * characters, and the agent inside it may then reach `isx mcp` over HTTP through the proxy
 * as the session `instance:<name>:<grant>`. Only the person grants it, from the host CLI:
 * `create_instance` never writes the stamp, and a copy never inherits it (every stamp of a
 * copy's source is unset in the copy request itself, mcp/host/stamps.ts `copyConfig`). The
 * grant is not a secret (the proxy also requires the per-start instance secret from the
 * instance's own address); it names one grant so that a coordinator destroyed and branched
 * again under the same name is another session.
 *
 * Pure apart from {@link stampGrant}, which writes through the injected client.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";

/** The stamp (prefix-less) that makes an instance a coordinator. */
export const MCP_CALLER_STAMP = "mcp-caller";

/** What a grant looks like. */
export const GRANT_RE = /^[0-9a-f]{32}$/;

/** A fresh grant: 128 random bits as 32 lower-case hex characters. */
export function newGrant(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** The grant of an instance's prefix-less stamps, when it has a well-formed one. */
export function grantOf(stamps: Readonly<Record<string, string>>): string | undefined {
  const g = stamps[MCP_CALLER_STAMP];
  return g && GRANT_RE.test(g) ? g : undefined;
}

/** The session id of a coordinator: `instance:<name>:<grant>` (§4.1). */
export function coordinatorSession(name: string, grant: string): string {
  return `instance:${name}:${grant}`;
}

/** The instance and grant a coordinator session id names, if it is one. */
export function parseCoordinatorSession(
  id: string,
): { instance: string; grant: string } | undefined {
  const m = /^instance:([A-Za-z0-9][A-Za-z0-9._/-]{0,127}):([0-9a-f]{32})$/.exec(id);
  return m ? { instance: m[1]!, grant: m[2]! } : undefined;
}

/**
 * Stamps a grant on `name` unless it has one (a coordinator keeps its grant, and so its
 * session, across starts); returns the grant in force. Only an isx instance can be one.
 */
export async function stampGrant(client: IncusClient, name: string): Promise<string> {
  let grant = "";
  await client.updateInstance(name, (i) => {
    const stamps = readStamps(i.config);
    if (stamps[STAMP.type] !== "instance") {
      throw new IsbError(
        "invalid",
        `make "${name}" a coordinator: it is not an instance isx branched`,
      );
    }
    grant = grantOf(stamps) ?? newGrant();
    return withStamps({ [MCP_CALLER_STAMP]: grant })(i);
  }, { step: `stamp the coordinator grant of ${name}` });
  return grant;
}
