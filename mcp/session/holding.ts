/**
 * Ownership stamps (shared/spec/isx-mcp.md §4.2-4.4): an instance made through isx mcp
 * belongs to the host user (`mcp-owner`) and is held by one session (`mcp-session`). The
 * rules that read them are pure; the session applies them to what Incus answers, re-read on
 * every call, so two servers never trust a stale view of each other.
 *
 * @module
 */

import { RefusalError } from "../errors.ts";

/** The MCP stamps (prefix-less; see mcp/host/stamps.ts). */
export const MCP_STAMP = {
  owner: "mcp-owner",
  session: "mcp-session",
  client: "mcp-client",
  clientPid: "mcp-client-pid",
  cwd: "mcp-cwd",
  purpose: "mcp-purpose",
  key: "mcp-idempotency-key",
  /** Set by a keyed create's copy request, cleared once the instance is made (§5). */
  creating: "mcp-creating",
  orphaned: "mcp-orphaned",
  kept: "mcp-kept",
  dormant: "mcp-dormant",
  cpuSample: "mcp-cpu-sample",
  pendingOp: "pending-op",
} as const;

/** How an instance stands for one session. */
export type Standing =
  | { kind: "not_mcp" }
  | { kind: "other_user" }
  | { kind: "mine" }
  | { kind: "held_elsewhere"; session: string; client: string; pid: string; cwd: string }
  | { kind: "orphan"; since?: string; session: string }
  | { kind: "kept" };

/** Reads an instance's standing from its stamps (pure). */
export function standing(
  s: Record<string, string>,
  me: { owner: string; session: string },
  alive: (session: string) => boolean,
): Standing {
  if (s["type"] !== "instance" || !s[MCP_STAMP.owner]) return { kind: "not_mcp" };
  if (s[MCP_STAMP.owner] !== me.owner) return { kind: "other_user" };
  if (s[MCP_STAMP.kept]) return { kind: "kept" };
  const holder = s[MCP_STAMP.session] ?? "";
  const orphaned = s[MCP_STAMP.orphaned] ?? "";
  const [since, by] = orphaned.split(" ");
  // an orphan stamp counts only when it names the current holder (§4.4), this session too:
  // a coordinator's session outlives its process and sees what it released (issue 20)
  if (orphaned && by === holder) return { kind: "orphan", session: holder, since: since! };
  if (holder === me.session) return { kind: "mine" };
  if (!holder || !alive(holder)) return { kind: "orphan", session: holder };
  return {
    kind: "held_elsewhere",
    session: holder,
    client: s[MCP_STAMP.client] ?? "",
    pid: s[MCP_STAMP.clientPid] ?? "",
    cwd: s[MCP_STAMP.cwd] ?? "",
  };
}

/**
 * Whether a session may act on instance `name` given its standing and whether the session's
 * registry holds it (`heldHere`): undefined when it may, else the refusal, with `lost` when
 * another session adopted it and the registry must forget it.
 */
export function holdRefusal(
  name: string,
  st: Standing,
  heldHere: boolean,
): { error: RefusalError; lost: boolean } | undefined {
  if (heldHere && st.kind === "mine") return undefined;
  const no = (code: "not_held" | "not_found", message: string, lost = false) => ({
    error: new RefusalError(code, message),
    lost,
  });
  if (heldHere && st.kind !== "kept") {
    return no(
      "not_held",
      `instance "${name}" was adopted by another session; this session no longer holds it`,
      true,
    );
  }
  if (st.kind === "held_elsewhere") {
    return no(
      "not_held",
      `instance "${name}" is held by another live session (pid ${st.pid}, client ${st.client}, in ${st.cwd}); adopt_instance with force takes it`,
    );
  }
  if (st.kind === "orphan") {
    return no(
      "not_found",
      `this session does not hold instance "${name}"; it is an orphan: adopt_instance takes it`,
    );
  }
  if (st.kind !== "mine" && st.kind !== "kept") {
    return no("not_found", `this session holds no instance "${name}"`);
  }
  return undefined;
}

/** The stamps a holder writes (creation and adoption), orphan mark and CPU sample cleared. */
export function holderStamps(h: {
  owner: string;
  session: string;
  client: string;
  pid: number;
  cwd: string;
}): Record<string, string> {
  return {
    [MCP_STAMP.owner]: h.owner,
    [MCP_STAMP.session]: h.session,
    [MCP_STAMP.client]: h.client,
    [MCP_STAMP.clientPid]: String(h.pid),
    [MCP_STAMP.cwd]: h.cwd,
    [MCP_STAMP.orphaned]: "",
    [MCP_STAMP.cpuSample]: "",
  };
}

/** The time an orphan was first known as one, or undefined (pure). */
export function orphanSince(s: Record<string, string>): string | undefined {
  const [since, by] = (s[MCP_STAMP.orphaned] ?? "").split(" ");
  return since && by === s[MCP_STAMP.session] ? since : undefined;
}

/** `purpose`: ≤ 200 characters, one line; stored stripped (§2). */
export function cleanPurpose(p: string): string | undefined {
  const t = p.trim();
  // deno-lint-ignore no-control-regex
  if (t.length > 200 || /[\x00-\x1f\x7f]/.test(t)) return undefined;
  return t;
}
