/**
 * `create_instance` with its idempotency key (§2.2, §5, seed 000): the key is the
 * `mcp-idempotency-key` stamp written by the copy request itself, so it lives exactly as
 * long as the instance and no host ledger can drift from Incus. A repeat finds the instance
 * under the key among the user's instances (any session): still being made → `busy` (here)
 * or `not_held` (a live session elsewhere); kept → `refused`; otherwise it is replayed, an
 * orphan adopted first, and a repeat asking for another template is `invalid_argument`
 * (replay.ts). The instance is made exactly as `isx branch` makes it ({@link branchInstance}); the limit
 * is counted before the copy, with creates in flight reserved.
 *
 * @module
 */

import { hasCode } from "../../rpc/base.ts";
import { readStamps, STAMP, withStamps } from "../host/stamps.ts";
import { branchDefaults, branchInstance } from "../instances/branch.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { execRecorded } from "../host/guest.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import type { Held } from "./types.ts";
import { randomTag } from "./session.ts";
import { approvedTemplate } from "./templates.ts";
import { type CreateArgs, type Created, ownedBy, replay, underKey } from "./replay.ts";
import { preflight } from "./adoption.ts";
import { createFromPool } from "./pooled.ts";

export { replayKeyed, userInstances } from "./replay.ts";
export type { CreateArgs, Created } from "./replay.ts";

async function clearTasks(s: Session, name: string): Promise<void> {
  const r = await execRecorded(s.incus, name, [
    "sh",
    "-c",
    'h=$(getent passwd agentuser | cut -d: -f6) && [ -n "$h" ] && rm -rf -- "$h/.isx-mcp/tasks"',
  ], { step: `clear the task records of ${name}`, deadlineMs: 60_000 }).catch(() => undefined);
  if (!r || r.exitCode !== 0) {
    throw new RefusalError(
      "unavailable",
      `fork "${name}": its copied task records could not be cleared, so the fork was removed; retry`,
    );
  }
}

/** The instance name for a template and hint (§2.2). */
export function instanceName(template: string, hint?: string): string {
  const base = template.replace(/^tpl-/, "");
  return `mcp-${base}${hint ? `-${hint}` : ""}-${randomTag(5)}`.slice(0, 63);
}

/**
 * Creates (or replays) an instance. `keyClaimed`: the caller (a keyed delegate) already
 * registered the key as in flight and looked it up.
 */
export async function createInstance(
  s: Session,
  args: CreateArgs,
  o: { keyClaimed?: boolean } = {},
): Promise<Created> {
  const key = args.idempotency_key;
  if (!key || o.keyClaimed) return await create(s, args);
  // the key is claimed before the first await: a repeat while this call still looks the key
  // up, checks limits or runs the preflight is `busy`, never a second instance
  if (s.keysInFlight.has(key)) {
    throw new RefusalError(
      "busy",
      `idempotency key "${key}": the first call is still running; retry as is`,
    );
  }
  s.keysInFlight.add(key);
  try {
    const found = await underKey(s, key);
    if (found[0]) return await replay(s, found[0], args);
    return await create(s, args);
  } finally {
    s.keysInFlight.delete(key);
  }
}

/** Creates an instance (a key, if any, is claimed by the caller and found unused). */
async function create(s: Session, args: CreateArgs): Promise<Created> {
  const key = args.idempotency_key;
  const cfg = s.deps.readConfig();
  const defs = s.deps.definitions();
  let template: string;
  let trusted: string | undefined;
  let tplConfig: Record<string, string> = {};
  if (args.from_instance) {
    // a fork: the source is held here and stopped; its template still approved, maybe unbuilt
    const src = await s.requireHeld(args.from_instance);
    if (src.status !== "Stopped") {
      throw new RefusalError(
        "wrong_state",
        `instance "${args.from_instance}" is ${src.status}; stop it with stop_instance before forking it`,
      );
    }
    const st = readStamps(src.config);
    template = st[STAMP.profile] ?? "";
    trusted = st[STAMP.caFingerprint];
  } else {
    template = args.template!;
  }
  const action = `create an instance of "${template}"`;
  // one listing answers the template's stamps, the limit and the pool's members, and the
  // preflight overlaps it; refusals keep their order (not built, not approved, limit, proxy)
  const pre = preflight(s, { action, template, defs }).then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  const all = await s.incus.listInstances().catch(async (e) => {
    await pre;
    throw e;
  });
  if (!args.from_instance) {
    const tpl = all.find((i) => i.name === template);
    if (!tpl || readStamps(tpl.config)[STAMP.type] !== "base") {
      await pre;
      throw new RefusalError(
        "wrong_state",
        `template "${template}" is approved but not built; ask the user to run isx build ${template}`,
      );
    }
    trusted = readStamps(tpl.config)[STAMP.caFingerprint];
    tplConfig = tpl.config;
  }
  let facts;
  try {
    facts = approvedTemplate(cfg, defs, template);
  } catch (e) {
    await pre;
    throw e;
  }
  const mine = ownedBy(s, all).filter((i) => !readStamps(i.config)[MCP_STAMP.kept]);
  const creating = [...s.held.values()].filter((h) => h.state === "creating").length;
  if (mine.length + creating >= cfg.maxInstances) {
    await pre;
    const elsewhere = mine.filter((i) => !s.held.has(i.name)).map((i) => i.name);
    throw new RefusalError(
      "limit",
      `max-instances reached: ${mine.length + creating} of ${cfg.maxInstances} instances exist (${
        mine.length - elsewhere.length
      } held here${
        elsewhere.length ? `, elsewhere: ${elsewhere.join(", ")}` : ""
      }); destroy one first`,
    );
  }
  const p = await pre;
  if (!p.ok) throw p.e;
  const health = p.v;
  // a warm pool's member when one is ready (pooled.ts); forks stay cold
  if (!args.from_instance && cfg.warmPool?.[template]) {
    const got = await createFromPool(s, { template, tplConfig, health, args, facts, defs, all });
    if (got) return got;
  }
  const name = instanceName(template, args.name_hint);
  const held: Held = {
    name,
    template,
    ...(args.purpose ? { purpose: args.purpose } : {}),
    created: new Date(s.deps.now()).toISOString(),
    state: "creating",
    kept: false,
  };
  s.held.set(name, held);
  try {
    const d = branchDefaults(defs, template);
    const r = await branchInstance(s.incus, {
      name,
      template,
      ...(args.from_instance ? { from: args.from_instance } : {}),
      proxy: await s.deps.proxyPlace(),
      network: d.network ?? "full",
      ...(d.limits ? { limits: d.limits } : {}),
      stamps: {
        ...s.holderStamps(),
        [MCP_STAMP.purpose]: args.purpose ?? "",
        [MCP_STAMP.key]: key ?? "",
        // a keyed copy is marked until it is made: cut off before, it never answers for the key
        ...(key ? { [MCP_STAMP.creating]: new Date(s.deps.now()).toISOString() } : {}),
        [MCP_STAMP.kept]: "",
        ...(trusted ? { [STAMP.caFingerprint]: trusted } : {}),
      },
    });
    await s.deps.checks?.repairCa(name, health, trusted);
    // a fork gets no tasks: the source's task records are cleared in the copy (one exec)
    if (args.from_instance) await clearTasks(s, name);
    if (key) {
      // across sessions: the first instance made under the key answers; a later copy goes
      const under = await underKey(s, key);
      if (under[0] && under[0].name !== name) {
        s.held.delete(name);
        await destroyIsxInstance(s.incus, name).catch(() => {});
        return replay(s, under[0], args);
      }
    }
    if (key) {
      await s.incus.updateInstance(name, withStamps({ [MCP_STAMP.creating]: "" }), {
        step: `mark ${name} made`,
      });
    }
    held.state = "ready";
    return {
      instance: name,
      template,
      ...(args.purpose ? { purpose: args.purpose } : {}),
      ...(args.from_instance ? { forked_from: args.from_instance } : {}),
      ...(r.ip ? { ip: r.ip } : {}),
      workdir: r.workdir,
      tools: facts.tools,
      supports_delegate: facts.delegate_agents.length > 0,
    };
  } catch (e) {
    s.held.delete(name);
    // nothing half-made stays: branchInstance removes a copy that cannot start; a copy
    // that failed later (the key check) is removed here
    if (!hasCode(e, "already_exists")) await destroyIsxInstance(s.incus, name).catch(() => {});
    throw e;
  }
}
