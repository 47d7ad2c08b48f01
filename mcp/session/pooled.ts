/**
 * `create_instance` served from a warm pool (issue 21, mcp/pool/): when `warm-pool:` asks for
 * a pool of the template and it is not a fork (forks stay cold), a ready, fresh member is claimed in one ETag-guarded update carrying this
 * session's stamps, the purpose, the idempotency key and a fresh secret's hash; the secret is
 * then delivered. A member's name is final from the start (Incus cannot rename a running
 * instance), so a `name_hint` becomes the `mcp-name-hint` stamp instead. None left (or every one stale, or lost to racing sessions): undefined, and
 * the caller copies as ever. The result is the same as a cold create's.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { branchDefaults } from "../instances/branch.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { claimMember, placeFingerprint } from "../pool/mod.ts";
import { MCP_STAMP } from "./holding.ts";
import { type CreateArgs, type Created, replay, underKey } from "./replay.ts";
import type { Session } from "./session.ts";
import type { Held } from "./types.ts";
import type { Definitions } from "../templates/load.ts";

/** The stamp a claimed member carries its create's `name_hint` in. */
export const POOL_NAME_HINT = "mcp-name-hint";

/** Claims a pool member for `args`, or undefined (go cold). */
export async function createFromPool(
  s: Session,
  o: {
    template: string;
    tplConfig: Record<string, string>;
    health: unknown;
    args: CreateArgs;
    facts: { tools: string[]; delegate_agents: readonly unknown[] };
    /** The definitions the create loaded (not loaded again). */
    defs: Definitions;
    /** The project's instances as the create listed them (not listed again). */
    all: readonly Instance[];
  },
): Promise<Created | undefined> {
  const { args, template } = o;
  const key = args.idempotency_key;
  const defs = o.defs;
  const servedCa = (o.health as { caFingerprint?: string } | undefined)?.caFingerprint;
  const present = {
    buildId: readStamps(o.tplConfig)[STAMP.buildId],
    servedCa,
    place: placeFingerprint(await s.deps.proxyPlace(), branchDefaults(defs, template)),
  };
  const t0 = s.deps.now();
  const c = await claimMember(s.incus, {
    template,
    listed: o.all,
    present,
    now: t0,
    stamps: {
      ...s.holderStamps(),
      [MCP_STAMP.purpose]: args.purpose ?? "",
      [MCP_STAMP.key]: key ?? "",
      // keyed: marked until the secret is delivered, as a cold copy is until it is made; a
      // server killed in between leaves a half-made orphan the keyed retry removes
      ...(key ? { [MCP_STAMP.creating]: new Date(t0).toISOString() } : {}),
      [MCP_STAMP.kept]: "",
      [POOL_NAME_HINT]: args.name_hint ?? "",
    },
  }).catch((e) => {
    s.audit({ tool: "pool", outcome: `claim failed: ${(e as Error).message}`, ms: 0 });
    return undefined;
  });
  for (const r of c?.retired ?? []) {
    s.audit({ tool: "pool", instance: r, outcome: "retired(stale)", ms: 0 });
  }
  if (!c) return undefined;
  const held: Held = {
    name: c.name,
    template,
    ...(args.purpose ? { purpose: args.purpose } : {}),
    created: new Date(t0).toISOString(),
    state: "ready",
    kept: false,
  };
  s.held.set(c.name, held);
  s.audit({ tool: "pool", instance: c.name, outcome: "claimed", ms: s.deps.now() - t0 });
  if (key) {
    // across sessions: the first instance made under the key answers; a later one goes
    const under = await underKey(s, key);
    if (under[0] && under[0].name !== c.name) {
      s.held.delete(c.name);
      await destroyIsxInstance(s.incus, c.name).catch(() => {});
      return replay(s, under[0], args);
    }
    await s.incus.updateInstance(c.name, withStamps({ [MCP_STAMP.creating]: "" }), {
      step: `mark ${c.name} made`,
    });
  }
  return {
    instance: c.name,
    template,
    ...(args.purpose ? { purpose: args.purpose } : {}),
    ...(c.ip ? { ip: c.ip } : {}),
    workdir: c.workdir,
    tools: o.facts.tools,
    supports_delegate: o.facts.delegate_agents.length > 0,
  };
}
