/**
 * Warm-pool members (issue 21): started copies of a template that belong to nobody yet. A
 * member is an ordinary `isx branch` copy (pinned NIC, static address, filters, CA trusted,
 * started, address known) stamped `mcp-pool`: `filling` while the keeper makes it, `ready`
 * once usable, `draining` while it is being removed. It has no `mcp-owner` (so
 * `list_instances` and `max-instances` never see it), no instance secret (no
 * `instance-secret-sha256`, no `/run/isx/instance-secret`), and the proxy answers its model
 * calls 403 "not claimed" (proxy/callers/_identity.ts reads the same stamp). A claim clears the
 * stamp in the same ETag-guarded update that stamps the session, so a member is either the
 * pool's or one session's, never both.
 *
 * Freshness is judged against the present, at claim time and by the keeper: the template's
 * build id (a rebuild since makes it stale), the CA it trusts (another than the proxy serves:
 * stale), and the placement fingerprint (proxy bridge, proxy-only bridge and ports, the
 * definition's network mode and limits: what a running member cannot follow).
 *
 * Pure.
 *
 * @module
 */

import { type Instance, sha256Hex } from "../../rpc/base.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import type { Limits } from "../instances/branch.ts";
import type { NetworkMode, ProxyPlace } from "../instances/network.ts";

/** The stamps of a pool member (prefix-less). */
export const POOL_STAMP = {
  /** `filling`, `ready` or `draining`; empty or absent once claimed. */
  state: "mcp-pool",
  /** When the keeper began making it (ISO). */
  since: "mcp-pool-since",
  /** The placement fingerprint it was made for ({@link placeFingerprint}). */
  place: "mcp-pool-place",
  /** agentuser's gid, once the keeper made `/run/isx` (the claim then only writes the file). */
  gid: "mcp-pool-gid",
  /** When a session claimed it (ISO); stays on a claimed instance. */
  claimed: "mcp-pool-claimed",
} as const;

/** A member's state word. */
export type MemberState = "filling" | "ready" | "draining";

/** What freshness is judged against. */
export interface Present {
  /** The template's current build id (its `build-id` stamp). */
  buildId: string | undefined;
  /** The CA fingerprint the proxy serves now (undefined: the proxy did not answer). */
  servedCa: string | undefined;
  /** The placement fingerprint members are made for now. */
  place: string;
}

/** One member as listed. */
export interface Member {
  /** Its name (final from the start: Incus cannot rename a running instance). */
  name: string;
  /** Its template. */
  template: string;
  /** Its state stamp. */
  state: MemberState;
  /** Incus status. */
  status: string;
  /** The static address of its pinned NIC. */
  ip: string | undefined;
  /** Why it may not be handed out, if it may not. */
  stale?: string;
  /** The instance as listed. */
  instance: Instance;
}

/** The placement fingerprint: what a running member is wired for and cannot change. */
export function placeFingerprint(
  proxy: ProxyPlace,
  d: { network?: NetworkMode; limits?: Limits },
): string {
  return sha256Hex(JSON.stringify({
    bridge: proxy.bridge,
    proxyOnlyBridge: proxy.proxyOnlyBridge ?? null,
    subnets: proxy.subnets ?? null,
    ports: proxy.ports ?? null,
    network: d.network ?? "full",
    limits: d.limits ?? null,
  })).slice(0, 16);
}

/** The member state of an instance's stamps, or undefined when it is no pool member. */
export function memberState(config: Record<string, string> | undefined): MemberState | undefined {
  const v = readStamps(config)[POOL_STAMP.state];
  return v === "filling" || v === "ready" || v === "draining" ? v : undefined;
}

/** Why a ready member may not be handed out for `present`, or undefined when it may. */
export function staleness(stamps: Record<string, string>, present: Present): string | undefined {
  if (!present.buildId || stamps[STAMP.buildId] !== present.buildId) {
    return "its template was rebuilt since";
  }
  if (present.servedCa && stamps[STAMP.caFingerprint] !== present.servedCa) {
    return "it trusts another proxy CA than the proxy serves";
  }
  if (stamps[POOL_STAMP.place] !== present.place) {
    return "the proxy's placement or the template's network or limits changed";
  }
  return undefined;
}

/** The pool members among `all`, judged against `present` per template (pure). */
export function poolMembers(
  all: readonly Instance[],
  present: (template: string) => Present | undefined,
): Member[] {
  const out: Member[] = [];
  for (const i of all) {
    const state = memberState(i.config);
    if (!state) continue;
    const st = readStamps(i.config);
    const template = st[STAMP.profile] ?? "";
    const p = present(template);
    const stale = state === "ready" && p ? staleness(st, p) : undefined;
    out.push({
      name: i.name,
      template,
      state,
      status: i.status,
      ip: st[STAMP.staticIp] || undefined,
      ...(stale ? { stale } : {}),
      instance: i,
    });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** A member's name: `pool-<template less tpl->-<tag>` (the pool's, not any session's). */
export function memberName(template: string, tag: string): string {
  return `pool-${template.replace(/^tpl-/, "")}-${tag}`.slice(0, 63);
}
