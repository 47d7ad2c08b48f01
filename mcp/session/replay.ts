/**
 * Finding what a key made (§5, seed 000): the user's instances, the one made first under an
 * idempotency key, and its replay in §5's decision order: kept → `refused`, held by a live
 * session → `not_held`, an orphan taken over (take_over.ts); only then another template or
 * fork source → `invalid_argument`, never redirected.
 *
 * @module
 */

import { type Instance, isNotFound } from "../../rpc/base.ts";
import { destroyIsxInstance } from "../instances/lifecycle.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { MCP_STAMP } from "./holding.ts";
import type { Session } from "./session.ts";
import { approvedTemplate } from "./templates.ts";
import { adoptKeyed } from "./adoption.ts";

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
  return ownedBy(s, await s.incus.listInstances());
}

/** The instances of `all` that are this user's isx instances (what {@link userInstances} keeps). */
export function ownedBy(s: Session, all: readonly Instance[]): Instance[] {
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

/** Replays the instance `inst` found under the key of `args` (see the module doc). */
export async function replay(
  s: Session,
  inst: Instance,
  args: CreateArgs,
  tool = "create_instance",
): Promise<Created> {
  const st = readStamps(inst.config);
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
  // §5 step 3: an orphan adopted with adoption's checks (its template still approved);
  // woken if dormant, records read
  const orphan = standing.kind === "orphan";
  const approved = orphan
    ? approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template)
    : undefined;
  await adoptKeyed(s, inst, orphan, tool);
  // §5 step 4: only now compare (an orphan under the key is adopted even when the repeat
  // asks for something else, which is then refused, never redirected)
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
  const facts = approved ?? approvedTemplate(s.deps.readConfig(), s.deps.definitions(), template);
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

/**
 * The user's instances made under `key` that answer for it, the first made first
 * (`created_at`, then name). A copy still marked `mcp-creating` whose session is gone was cut
 * off before it was made (§5): it never answers, and is destroyed here so that the repeat
 * makes the instance anew (another repeat racing this one finds it gone, which is fine).
 */
export async function underKey(s: Session, key: string): Promise<Instance[]> {
  const found = (await userInstances(s)).filter((i) => readStamps(i.config)[MCP_STAMP.key] === key);
  const halfMade = found.filter((i) =>
    readStamps(i.config)[MCP_STAMP.creating] && s.standingOf(i).kind === "orphan"
  );
  await Promise.all(halfMade.map(async (i) => {
    const t0 = s.deps.now();
    const outcome = await destroyIsxInstance(s.incus, i.name).then(
      () => "destroyed(half-made)",
      (e) => isNotFound(e) ? "gone(half-made)" : `failed(half-made): ${(e as Error).message}`,
    );
    s.audit({ tool: "idempotency", instance: i.name, outcome, ms: s.deps.now() - t0 });
  }));
  return found.filter((i) => !halfMade.includes(i))
    .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.name.localeCompare(b.name));
}

/**
 * The replay of a keyed create when an instance exists under its key (§5 decision order:
 * kept `refused`, held by a live session `not_held`, an orphan adopted, another template or
 * source `invalid_argument`); undefined when nothing was made under it.
 */
export async function replayKeyed(
  s: Session,
  args: CreateArgs & { idempotency_key: string },
  tool = "create_instance",
): Promise<Created | undefined> {
  const found = await underKey(s, args.idempotency_key);
  return found[0] ? await replay(s, found[0], args, tool) : undefined;
}
