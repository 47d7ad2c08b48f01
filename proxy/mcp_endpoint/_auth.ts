/**
 * Who may reach `isx mcp` at `https://mcp.isx.internal/mcp` (shared/spec/isx-mcp.md §10,
 * seed 002, issue 20): a caller whose source address, `X-Isx-Instance-Secret` header and
 * `mcp-caller` stamp all name the same running instance. The address names the instance
 * (proxy/callers/: by its pinned NIC's configuration, never by what the guest says); the
 * secret must be that instance's per-start secret (its SHA-256 is stamped, compared in
 * constant time); and that instance must carry a coordinator grant, which only the person
 * stamps (`isx branch|start --mcp-client`). Everyone else gets 403 with the reason and no
 * MCP session: no child is started and nothing reaches `isx mcp`.
 *
 * Pure.
 *
 * @module
 */

import type { Caller } from "../callers/clients.ts";
import { secretMatches } from "../callers/admit.ts";
import { INSTANCE_SECRET_HEADER } from "../relay/rewrite.ts";

/** The endpoint's host name (resolves to the gateway in guests, like the intercepted ones). */
export const MCP_HOST = "mcp.isx.internal";

/** The endpoint's path. */
export const MCP_PATH = "/mcp";

/** Who the coordinator is, once admitted. */
export interface Coordinator {
  /** The instance (`project/name` outside the default project). */
  name: string;
  /** Its grant (the session is `instance:<name>:<grant>`). */
  grant: string;
}

/** The decision on one request to the endpoint. */
export type McpAdmission =
  | { ok: true; coordinator: Coordinator }
  | { ok: false; status: 403; reason: string };

/** Decides whether `caller`, presenting `headers`, may reach isx mcp. */
export function admitCoordinator(caller: Caller | undefined, headers: Headers): McpAdmission {
  const no = (reason: string) => ({ ok: false as const, status: 403 as const, reason });
  if (!caller) return no("this address belongs to no instance");
  const presented = headers.get(INSTANCE_SECRET_HEADER);
  if (presented === null || presented.trim() === "") {
    return no(`a coordinator presents its instance secret in ${INSTANCE_SECRET_HEADER}`);
  }
  if (!secretMatches(caller, presented)) {
    return no("the instance secret does not belong to the calling instance");
  }
  if (!caller.mcpCaller) {
    return no(
      `instance "${caller.name}" is not a coordinator: only the user makes one (isx branch --mcp-client)`,
    );
  }
  return { ok: true, coordinator: { name: caller.name, grant: caller.mcpCaller } };
}
