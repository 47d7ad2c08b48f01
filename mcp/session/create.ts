/**
 * `create_instance` with its idempotency key (§2.2, §5, seed 000): the key is the
 * `mcp-idempotency-key` stamp written by the copy request itself, so it lives exactly as
 * long as the instance and no host ledger can drift from Incus. A repeat finds the instance
 * under the key among the user's instances (any session): still being made → `busy` (here)
 * or `not_held` (a live session elsewhere); kept → `refused`; otherwise it is replayed, an
 * orphan adopted first, and a repeat asking for another template is `invalid_argument`.
 * The instance is made exactly as `isx branch` makes it ({@link branchInstance}); the limit
 * is counted before the copy, with creates in flight reserved.
 *
 * @module
 */

import type { Instance } from "../../rpc/base.ts";
import { hasCode, isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { branchDefaults, branchInstance } from "../instances/branch.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { execRecorded } from "../host/guest.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import type { Held } from "./types.ts";
import { randomTag } from "./session.ts";
import { approvedTemplate } from "./templates.ts";
import { takeOver } from "./take_over.ts";
import type { Definitions } from "../templates/load.ts";

/** What create_instance was asked. */
export interface CreateArgs {
  /** The template (exactly one of this and `from_instance`). */
  template?: string;
  /** A stopped instance this session holds, to fork. */
  from_instance?: string;
  /** Name hint. */
  name_hint?: string;
  /** Purpose. */
  purpose?: string;
  /** Idempotency key. */
  idempotency_key?: string;
}

/** What create_instance answers. */
export interface Created {
  instance: string;
  template: string;
  purpose?: string;
  forked_from?: string;
  ip?: string;
  workdir: string;
  tools: string[];
  supports_delegate: boolean;
  replayed?: boolean;
}

/** The user's isx mcp instances (one listing). */
export async function userInstances(s: Session): Promise<Instance[]> {
  const all = await s.incus.listInstances();
  return all.filter((i) => {
    const st = readStamps(i.config);
    return st[STAMP.type] === "instance" && st[MCP_STAMP.owner] === s.deps.owner;
  });
}

function ipOf(i: Instance & { state?: { network?: Record<string, unknown> } }): string | undefined {
  const net = (i.state?.network ?? {}) as Record<
    string,
    { addresses: { family: string; scope: string; address: string }[] }
  >;
  for (const [dev, n] of Object.entries(net)) {
    if (dev === "lo") continue;
    const a = n.addresses.find((x) => x.family === "inet" && x.scope === "global");
    if (a) return a.address;
  }
  return undefined;
}

async function replay(s: Session, inst: Instance, args: CreateArgs): Promise<Created> {
  const st = readStamps(inst.config);
  const made = st[STAMP.parent] === st[STAMP.profile]
    ? `template "${st[STAMP.profile]}"`
    : `instance "${st[STAMP.parent]}"`;
  const asked = args.from_instance
    ? `instance "${args.from_instance}"`
    : `template "${args.template}"`;
  if (made !== asked) {
    throw new RefusalError(
      "invalid_argument",
      `idempotency key "${args.idempotency_key}" already made instance "${inst.name}" from ${made}, not ${asked}; use a new key for a different request`,
    );
  }
  const template = st[STAMP.profile] ?? "";
  const standing = s.standingOf(inst);
  if (standing.kind === "kept") {
    throw new RefusalError(
      "refused",
      `idempotency key "${args.idempotency_key}" made instance "${inst.name}", which was handed to the user with keep_instance; look it up with list_instances rather than retrying`,
    );
  }
  if (standing.kind === "held_elsewhere") {
    throw new RefusalError(
      "not_held",
      `idempotency key "${args.idempotency_key}" made instance "${inst.name}", which another live session (pid ${standing.pid}, client ${standing.client}) holds; use adopt_instance with force to take it`,
    );
  }
  if (standing.kind === "orphan") await takeOver(s, inst);
  const facts = approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template);
  const state = await s.incus.getInstanceState(inst.name).catch(() => undefined);
  const ip = state ? ipOf({ ...inst, state } as never) : undefined;
  return {
    instance: inst.name,
    template,
    ...(st[MCP_STAMP.purpose] ? { purpose: st[MCP_STAMP.purpose] } : {}),
    ...(st[STAMP.parent] !== template ? { forked_from: st[STAMP.parent]! } : {}),
    ...(ip ? { ip } : {}),
    workdir: st[STAMP.workdir] || "/home/agentuser",
    tools: facts.tools,
    supports_delegate: facts.delegate_agents.length > 0,
    replayed: true,
  };
}

/** Runs `isx branch`'s preflight; its refusal (the user must act) is `refused`. */
export async function preflight(
  s: Session,
  o: { action: string; template?: string; defs?: Definitions },
): Promise<unknown> {
  if (!s.deps.checks) return undefined;
  try {
    return await s.deps.checks.preflight(o);
  } catch (e) {
    if (hasCode(e, "not_ready")) {
      throw new RefusalError(
        "refused",
        `${e.message.replace(/ \(or --no-preflight\)$/, "")}; ask the user to fix it`,
      );
    }
    throw e;
  }
}

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

/** Creates (or replays) an instance. */
export async function createInstance(s: Session, args: CreateArgs): Promise<Created> {
  const key = args.idempotency_key;
  const cfg = s.deps.readConfig();
  if (key) {
    if (s.keysInFlight.has(key)) {
      throw new RefusalError(
        "busy",
        `idempotency key "${key}": the first call is still running; retry as is`,
      );
    }
    const found = (await userInstances(s)).filter((i) =>
      readStamps(i.config)[MCP_STAMP.key] === key
    )
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.name.localeCompare(b.name));
    if (found[0]) return replay(s, found[0], args);
  }
  const defs = s.deps.definitions();
  let template: string;
  let trusted: string | undefined;
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
    const tpl = await s.incus.getInstance(template).catch((e) => {
      if (isNotFound(e)) return undefined;
      throw e;
    });
    if (!tpl || readStamps(tpl.value.config)[STAMP.type] !== "base") {
      throw new RefusalError(
        "wrong_state",
        `template "${template}" is approved but not built; ask the user to run isx build ${template}`,
      );
    }
    trusted = readStamps(tpl.value.config)[STAMP.caFingerprint];
  }
  const facts = approvedTemplate(cfg, defs, template);
  const mine = (await userInstances(s)).filter((i) => !readStamps(i.config)[MCP_STAMP.kept]);
  const creating = [...s.held.values()].filter((h) => h.state === "creating").length;
  if (mine.length + creating >= cfg.maxInstances) {
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
  const action = `create an instance of "${template}"`;
  const health = await preflight(s, { action, template, defs });
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
  if (key) s.keysInFlight.add(key);
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
        [MCP_STAMP.kept]: "",
        ...(trusted ? { [STAMP.caFingerprint]: trusted } : {}),
      },
    });
    await s.deps.checks?.repairCa(name, health, trusted);
    // a fork gets no tasks: the source's task records are cleared in the copy (one exec)
    if (args.from_instance) await clearTasks(s, name);
    if (key) {
      // across sessions: the first instance made under the key answers; a later copy goes
      const under = (await userInstances(s)).filter((i) =>
        readStamps(i.config)[MCP_STAMP.key] === key
      )
        .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.name.localeCompare(b.name));
      if (under[0] && under[0].name !== name) {
        s.held.delete(name);
        await destroyIsxInstance(s.incus, name).catch(() => {});
        return replay(s, under[0], args);
      }
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
  } finally {
    if (key) s.keysInFlight.delete(key);
  }
}
