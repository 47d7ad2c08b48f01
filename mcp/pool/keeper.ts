/**
 * The keeper (issue 21): one long-running host process (`isx pool keep`) that keeps every
 * pool of `warm-pool:` filled. Each pass reads the settings afresh, retires stale members
 * and members no pool asks for any more, then makes the missing ones one at a time (this
 * host has two cores; members boot in a second). A fill is bounded by the configured count
 * and by the host memory guard ({@link memoryAllows}): no fill while less than the floor is
 * available. Only the holder of the keeper lock (lock.ts) fills, so a member still
 * `filling` when a keeper takes the lock was left by a dead one and is removed first.
 * Nothing here is needed for a create: with no keeper the pools simply stay empty and
 * creates go the cold way.
 *
 * @module
 */

import { type IncusClient, type Instance, isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { branchDefaults, branchInstance } from "../instances/branch.ts";
import { prepareSecretDir } from "../instances/secret.ts";
import type { ProxyPlace } from "../instances/network.ts";
import type { Definitions } from "../templates/load.ts";
import type { McpConfig } from "../session/config.ts";
import { resolveChain } from "../templates/resolve.ts";
import { AGENTS } from "../session/templates.ts";
import { ensureRunners } from "../delegate/guest.ts";
import { retireMember } from "./claim.ts";
import {
  type Member,
  memberName,
  placeFingerprint,
  POOL_STAMP,
  poolMembers,
  type Present,
} from "./members.ts";

/** What the keeper needs from the world. */
export interface PoolDeps {
  /** The Incus client. */
  incus: IncusClient;
  /** The `mcp` settings (re-read every pass). */
  readConfig(): McpConfig;
  /** The user's template definitions (trusted layers). */
  definitions(): Definitions;
  /** Where the proxy is. */
  proxyPlace(): Promise<ProxyPlace>;
  /** The CA fingerprint the proxy serves (undefined: it does not answer). */
  servedCa(): Promise<string | undefined>;
  /** Repairs a running member's trust store to the served CA; stamps what it trusts. */
  repairCa(name: string, trusted: string | undefined): Promise<void>;
  /** Available and total host memory in bytes, if readable. */
  memory(): { available: number; total: number } | undefined;
  /** The clock. */
  now(): number;
  /** A line for the keeper's log. */
  log(line: string): void;
}

/** The memory floor: no fill while less than max(2 GiB, 20% of the host) is available. */
export function memoryFloor(total: number): number {
  return Math.max(2 * 1024 ** 3, Math.floor(total * 0.2));
}

/** Whether the memory guard lets one more member be made (unknown memory: yes). */
export function memoryAllows(m: { available: number; total: number } | undefined): boolean {
  return !m || m.available >= memoryFloor(m.total);
}

/** What a member of `template` is judged against now (undefined: the template is not built). */
export async function presentFor(
  deps: Pick<PoolDeps, "incus" | "definitions" | "proxyPlace">,
  template: string,
  servedCa: string | undefined,
): Promise<Present | undefined> {
  const tpl = await deps.incus.getInstance(template).catch((e) => {
    if (isNotFound(e)) return undefined;
    throw e;
  });
  const st = readStamps(tpl?.value.config);
  if (!tpl || st[STAMP.type] !== "base") return undefined;
  const place = placeFingerprint(
    await deps.proxyPlace(),
    branchDefaults(deps.definitions(), template),
  );
  return { buildId: st[STAMP.buildId], servedCa, place };
}

/** True when `template`'s tools include an agent a delegation can run. */
function hasAgents(defs: Definitions, template: string): boolean {
  try {
    const leaf = resolveChain(defs, template).at(-1);
    return AGENTS.some((a) => leaf?.allTools.includes(a));
  } catch {
    return false;
  }
}

function tag(): string {
  const chars = "abcdefghijkmnpqrstuvwxyz23456789";
  return [...crypto.getRandomValues(new Uint8Array(5))].map((b) => chars[b % 32]).join("");
}

/**
 * Makes one member of `template`: an `isx branch` copy with no secret, stamped `filling`
 * from its copy request on (so a keeper killed at any point leaves a marked copy), its CA
 * repaired to the served one, the agent runners in place (a template with agents), then
 * stamped `ready`. Nothing half-made stays on failure.
 */
export async function fillOne(deps: PoolDeps, template: string, present: Present): Promise<string> {
  const defs = deps.definitions();
  const d = branchDefaults(defs, template);
  const tpl = (await deps.incus.getInstance(template)).value;
  const trusted = readStamps(tpl.config)[STAMP.caFingerprint];
  const name = memberName(template, tag());
  await branchInstance(deps.incus, {
    name,
    template,
    proxy: await deps.proxyPlace(),
    network: d.network ?? "full",
    ...(d.limits ? { limits: d.limits } : {}),
    secret: false,
    stamps: {
      [POOL_STAMP.state]: "filling",
      [POOL_STAMP.since]: new Date(deps.now()).toISOString(),
      [POOL_STAMP.place]: present.place,
      ...(trusted ? { [STAMP.caFingerprint]: trusted } : {}),
    },
  });
  try {
    await deps.repairCa(name, trusted);
    // the secret's directory now, so a claim writes one file (no secret in it until then);
    // and the agent runners, so a delegation on the claimed member pushes none
    const [gid] = await Promise.all([
      prepareSecretDir(deps.incus, name),
      hasAgents(defs, template) ? ensureRunners(deps.incus, name) : undefined,
    ]);
    await deps.incus.updateInstance(
      name,
      withStamps({
        [POOL_STAMP.state]: "ready",
        [POOL_STAMP.gid]: String(gid),
      }),
      {
        step: `mark pool member ${name} ready`,
      },
    );
  } catch (e) {
    await deps.incus.stopInstance(name, { step: `stop ${name}`, force: true }).catch(() => {});
    await deps.incus.deleteInstance(name, { step: `delete ${name}` }).catch(() => {});
    throw e;
  }
  return name;
}

/** One template's pool as `isx pool` shows it. */
export interface PoolView {
  /** The template. */
  template: string;
  /** The configured count. */
  want: number;
  /** Ready, fresh, running members. */
  ready: string[];
  /** Members being made (or left by a dead keeper). */
  filling: string[];
  /** Members that may not be handed out, and why. */
  stale: { name: string; why: string }[];
}

/** Every member, judged against the present (one listing, one template read per template). */
export async function listMembers(
  deps: Pick<PoolDeps, "incus" | "definitions" | "proxyPlace" | "servedCa">,
): Promise<{ members: Member[]; present: Map<string, Present | undefined> }> {
  const [all, ca] = await Promise.all([deps.incus.listInstances(), deps.servedCa()]);
  const templates = new Set<string>();
  for (const i of all) {
    const st = readStamps(i.config);
    if (st[POOL_STAMP.state]) templates.add(st[STAMP.profile] ?? "");
  }
  const present = new Map<string, Present | undefined>();
  for (const t of templates) present.set(t, await presentFor(deps, t, ca));
  const members = poolMembers(all, (t) => present.get(t)).map((m) =>
    m.state === "ready" && !present.get(m.template) && !m.stale
      ? { ...m, stale: "its template is not built any more" }
      : m
  );
  return { members, present };
}

/** The pools of `cfg` and any template that still has members. */
export function poolViews(cfg: McpConfig, members: readonly Member[]): PoolView[] {
  const names = new Set([...Object.keys(cfg.warmPool), ...members.map((m) => m.template)]);
  return [...names].sort().map((template) => {
    const mine = members.filter((m) => m.template === template);
    return {
      template,
      want: cfg.warmPool[template] ?? 0,
      ready: mine.filter((m) => m.state === "ready" && !m.stale && m.status === "Running")
        .map((m) => m.name),
      filling: mine.filter((m) => m.state === "filling").map((m) => m.name),
      stale: mine.filter((m) =>
        m.stale || m.state === "draining" || (m.state === "ready" && m.status !== "Running")
      )
        .map((m) => ({
          name: m.name,
          why: m.stale ?? (m.state === "draining" ? "being removed" : `it is ${m.status}`),
        })),
    };
  });
}

/**
 * Removes what a dead keeper left: every `filling` member (only the lock holder calls this,
 * so none is being made now). Returns the names removed.
 */
export async function cleanLeftovers(deps: PoolDeps): Promise<string[]> {
  const all: Instance[] = await deps.incus.listInstances();
  const left = poolMembers(all, () => undefined).filter((m) =>
    m.state === "filling" || m.state === "draining"
  );
  const out: string[] = [];
  for (const m of left) {
    await deps.incus.stopInstance(m.name, { step: `stop ${m.name}`, force: true }).catch(() => {});
    await deps.incus.deleteInstance(m.name, { step: `delete ${m.name}` }).then(
      () => out.push(m.name),
      (e) => isNotFound(e) || deps.log(`pool: remove ${m.name}: ${(e as Error).message}`),
    );
  }
  return out;
}

/** What one pass did. */
export interface PassResult {
  /** Members made. */
  filled: string[];
  /** Members retired (stale, unwanted or beyond the count). */
  retired: string[];
  /** Why a fill was held back, if one was. */
  held?: string;
}

/**
 * One pass: retire stale and unwanted members, then fill every pool up to its count (with
 * `maxFills` as a bound per pass) while the memory guard allows.
 */
export async function keepPass(deps: PoolDeps, o: { maxFills?: number } = {}): Promise<PassResult> {
  const cfg = deps.readConfig();
  const { members, present } = await listMembers(deps);
  const out: PassResult = { filled: [], retired: [] };
  const views = poolViews(cfg, members);
  for (const v of views) {
    const extra = v.ready.slice(v.want);
    for (
      const name of [
        ...v.stale.filter((s) => s.why !== "being removed").map((s) => s.name),
        ...extra,
      ]
    ) {
      if (await retireMember(deps.incus, name).catch(() => false)) out.retired.push(name);
    }
  }
  let budget = o.maxFills ?? Infinity;
  const ca = await deps.servedCa();
  for (const v of views) {
    let missing = v.want - Math.min(v.ready.length, v.want) - v.filling.length;
    if (missing <= 0) continue;
    const p = present.get(v.template) ?? await presentFor(deps, v.template, ca);
    if (!p) {
      out.held = `template "${v.template}" is not built`;
      continue;
    }
    while (missing-- > 0 && budget > 0) {
      if (!memoryAllows(deps.memory())) {
        out.held = "host memory guard: less than max(2 GiB, 20%) of memory is available";
        return out;
      }
      budget--;
      out.filled.push(await fillOne(deps, v.template, p));
    }
  }
  return out;
}

/** Empties pools (all, or `template`'s): every ready member is retired. */
export async function drainPools(deps: PoolDeps, template?: string): Promise<string[]> {
  const { members } = await listMembers(deps);
  const out: string[] = [];
  for (const m of members) {
    if (template && m.template !== template) continue;
    if (m.state === "filling") continue;
    if (await retireMember(deps.incus, m.name).catch(() => false)) out.push(m.name);
  }
  return out;
}
