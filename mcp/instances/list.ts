/**
 * `isx list`: every instance isx made (templates, builds in progress or failed, and
 * instances), from one `recursion=2` listing that carries state and addresses. Records
 * end with `mcp_state` (`held`, `orphaned`, `kept`, else null) and `mcp_purpose`
 * (shared/spec/isx-mcp.md §4.7), then `ca_outdated`: whether a template or instance trusts
 * another proxy CA than the current one (null when unknown or not stamped); the table gains
 * an MCP column only when some instance has MCP stamps, and a CA column only when something
 * is out of date. Control characters in stamps are flattened for people.
 *
 * @module
 */

import type { IncusClient, Instance, InstanceState } from "../../rpc/base.ts";
import { readStamps, STAMP } from "../host/stamps.ts";

/** One row of `isx list`. */
export interface ListRecord {
  /** The name. */
  name: string;
  /** template, build or instance. */
  kind: "template" | "build" | "instance";
  /** Incus status. */
  status: string;
  /** The template it is (templates) or was copied from (instances). */
  template: string | null;
  /** The IPv4 address, if waited for. */
  ip: string | null;
  /** The network mode. */
  network: string | null;
  /** Creation time (ISO). */
  created: string;
  /** held, orphaned, kept, pool (an unclaimed warm-pool member, mcp/pool/) or null. */
  mcp_state: "held" | "orphaned" | "kept" | "pool" | null;
  /** The MCP purpose stamp. */
  mcp_purpose: string | null;
  /** Trusts another proxy CA than the current one (templates: isx build; instances: start). */
  ca_outdated: boolean | null;
}

const KIND: Record<string, ListRecord["kind"]> = {
  base: "template",
  build: "build",
  instance: "instance",
};

function ipOf(state: InstanceState | undefined): string | null {
  for (const [dev, n] of Object.entries(state?.network ?? {})) {
    if (dev === "lo") continue;
    const a = n.addresses.find((x) => x.family === "inet" && x.scope === "global");
    if (a) return a.address;
  }
  return null;
}

/**
 * Whether the `isx mcp` session `session` of owner `owner` (`mcp-owner`) still runs; `true`
 * when the caller cannot tell (another user's or state directory's sessions).
 */
export type HolderAlive = (session: string, owner: string) => boolean;

/**
 * The MCP state of an instance from its stamps; with `alive`, an instance whose holder died
 * without releasing it (killed) is `orphaned` before any sweep has stamped it.
 */
export function mcpState(s: Record<string, string>, alive?: HolderAlive): ListRecord["mcp_state"] {
  if (s["mcp-kept"]) return "kept";
  if (s["mcp-pool"]) return "pool";
  const orphaned = s["mcp-orphaned"];
  const session = s["mcp-session"];
  if (orphaned && session && orphaned.split(" ")[1] === session) return "orphaned";
  if (session) return alive && !alive(session, s["mcp-owner"] ?? "") ? "orphaned" : "held";
  return null;
}

/** The record of one instance, or undefined if isx did not make it (pure). */
export function toRecord(
  inst: Instance & { state?: InstanceState },
  currentCa?: string,
  alive?: HolderAlive,
): ListRecord | undefined {
  const s = readStamps(inst.config);
  const kind = KIND[s[STAMP.type] ?? ""];
  if (!kind) return undefined;
  return {
    name: inst.name,
    kind,
    status: inst.status,
    template: s[STAMP.profile] || null,
    ip: ipOf(inst.state),
    network: s[STAMP.network] || null,
    created: inst.created_at,
    mcp_state: mcpState(s, alive),
    mcp_purpose: s["mcp-purpose"] || null,
    ca_outdated: currentCa && s[STAMP.caFingerprint] ? s[STAMP.caFingerprint] !== currentCa : null,
  };
}

/**
 * Lists isx's instances, templates first, then by name; `currentCa` marks outdated CAs and
 * `alive` tells held from orphaned (see {@link mcpState}).
 */
export async function listIsxInstances(
  client: IncusClient,
  currentCa?: string | Promise<string | undefined>,
  alive?: HolderAlive,
): Promise<ListRecord[]> {
  // the CA look-up (the proxy's /health) runs while Incus answers, not before it
  const [r, ca] = await Promise.all([
    client.call("GET", "/1.0/instances", { query: { recursion: 2 } }),
    currentCa,
  ]);
  const all = (r.kind === "sync" ? r.metadata : []) as (Instance & { state?: InstanceState })[];
  const order = { template: 0, build: 1, instance: 2 };
  return all.flatMap((i) => toRecord(i, ca, alive) ?? [])
    .sort((a, b) => order[a.kind] - order[b.kind] || a.name.localeCompare(b.name));
}

function flat(s: string): string {
  // deno-lint-ignore no-control-regex
  return s.replace(/[\x00-\x1f\x7f]+/g, " ");
}

/** The table people see. */
export function formatTable(rows: readonly ListRecord[]): string {
  const mcp = rows.some((r) => r.mcp_state !== null);
  const ca = rows.some((r) => r.ca_outdated === true);
  const head = [
    "NAME",
    "KIND",
    "STATUS",
    "TEMPLATE",
    "IPV4",
    "NETWORK",
    ...(mcp ? ["MCP"] : []),
    ...(ca ? ["CA"] : []),
  ];
  const body = rows.map((r) => [
    flat(r.name),
    r.kind,
    r.status,
    flat(r.template ?? "-"),
    r.ip ?? "-",
    r.network ?? "-",
    ...(mcp
      ? [
        r.mcp_state === null ? "-" : flat(
          r.mcp_state === "orphaned"
            ? "orphaned"
            : `${r.mcp_state}${r.mcp_purpose ? ": " + r.mcp_purpose : ""}`,
        ),
      ]
      : []),
    ...(ca
      ? [
        r.ca_outdated === true
          ? (r.kind === "template" ? `out of date: isx build ${flat(r.name)}` : "out of date")
          : r.ca_outdated === false
          ? "ok"
          : "-",
      ]
      : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  return [head, ...body].map((cols) =>
    cols.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()
  )
    .join("\n");
}
