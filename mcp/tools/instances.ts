/**
 * The instance tools that list and make: `list_templates`, `create_instance`,
 * `list_instances` (§2.1-2.3, seed 000). Lifecycle tools (adopt, start, stop, keep, destroy)
 * are in `lifecycle.ts`.
 *
 * @module
 */

import * as z from "zod";
import { isNotFound } from "../../rpc/base.ts";
import { readStamps, STAMP } from "../host/stamps.ts";
import { RefusalError } from "../errors.ts";
import { createInstance, userInstances } from "../session/create.ts";
import { cleanPurpose, MCP_STAMP, orphanSince } from "../session/holding.ts";
import { dormantSince } from "../session/dormant_sweep.ts";
import { approvedTemplate, builtState } from "../session/templates.ts";
import {
  IdempotencyKey,
  InstanceName,
  IsoTime,
  once,
  TaskId,
  TaskKind,
  TaskState,
  tool,
} from "./def.ts";
import { lifecycleTools } from "./lifecycle.ts";

const Agent = once(() =>
  z.strictObject({
    agent: z.enum(["claude", "codex", "pi", "opencode"]),
    model: z.string().optional(),
    supports_model_preflight: z.boolean(),
    permission_mode: z.string(),
    approval_policy: z.string().optional(),
  })
);

/** The agents a coordinator's start registers against mcp.isx.internal. */
const COORDINATE_AGENTS = ["claude", "opencode"] as const;

const listTemplates = tool({
  name: "list_templates",
  description:
    "List the templates the user approved for agents (built or not), with their tools and the limits of mcp.yaml. Start here.",
  input: () => z.strictObject({}),
  output: () =>
    z.strictObject({
      templates: z.array(z.strictObject({
        template: z.string(),
        description: z.string().optional(),
        built: z.boolean(),
        stale: z.boolean(),
        tools: z.array(z.string()),
        supports_delegate: z.boolean(),
        delegate_agents: z.array(Agent()),
        default_delegate_agent: z.string().optional(),
        supports_ask: z.boolean(),
        summary_agent: z.string().optional(),
        /** Its agents that can coordinate from inside (isx branch --mcp-client; issue 20). */
        coordinate_agents: z.array(z.enum(["claude", "opencode"])),
      })),
      max_instances: z.number().int(),
      max_concurrent_tasks: z.number().int(),
      orphan_grace_hours: z.number(),
    }),
  hints: { readOnly: true, idempotent: true },
  async run(_args, { session: s }) {
    const cfg = s.deps.readConfig();
    const defs = s.deps.definitions();
    const templates = [];
    const skipped: string[] = [];
    const noAsk: string[] = [];
    for (const name of cfg.templates) {
      let facts;
      try {
        facts = approvedTemplate(cfg, defs, name);
      } catch (e) {
        skipped.push(`${name} (${(e as Error).message})`);
        continue;
      }
      const inst = await s.incus.getInstance(name).catch((e) => {
        if (isNotFound(e)) return undefined;
        throw e;
      });
      const b = builtState(defs, name, inst?.value.config);
      templates.push({
        template: name,
        ...(facts.description ? { description: facts.description } : {}),
        built: b.built,
        stale: b.stale,
        tools: facts.tools,
        supports_delegate: facts.delegate_agents.length > 0,
        delegate_agents: facts.delegate_agents as z.infer<ReturnType<typeof Agent>>[],
        ...(facts.delegate_agents[0]
          ? { default_delegate_agent: String(facts.delegate_agents[0].agent) }
          : {}),
        supports_ask: facts.summary_agent !== undefined,
        ...(facts.summary_agent ? { summary_agent: facts.summary_agent.agent } : {}),
        // agents with an MCP client that can send the instance secret (Pi has none; Codex
        // cannot read the header from a file): mcp/instances/mcp_client_reg.ts
        coordinate_agents: COORDINATE_AGENTS.filter((a) => facts.tools.includes(a)),
      });
      if (!facts.summary_agent && facts.delegate_agents.length) {
        noAsk.push(`${name} (${facts.summary_problem})`);
      }
    }
    const structured = {
      templates,
      max_instances: cfg.maxInstances,
      max_concurrent_tasks: cfg.maxConcurrentTasks,
      orphan_grace_hours: cfg.orphanGraceHours,
    };
    const notes = [];
    if (!cfg.templates.length) {
      notes.push(
        `No template is approved. Only the user can approve templates, under "templates" in ${cfg.source}.`,
      );
    }
    if (skipped.length) notes.push(`Not usable: ${skipped.join("; ")}`);
    if (noAsk.length) notes.push(`No summary agent for ask: ${noAsk.join("; ")}`);
    if (templates.some((t) => !t.built)) {
      notes.push(
        "A template that is not built must be built by the user first: isx build <template>.",
      );
    }
    return { structured, ...(notes.length ? { note: notes.join("\n") } : {}) };
  },
});

const create = tool({
  name: "create_instance",
  description:
    "Create a disposable instance, copy-on-write from an approved, built template. Give a purpose and an idempotency_key derived from the work: a repeat with the same key returns the same instance (replayed: true), even after a crash.",
  input: () =>
    z.strictObject({
      template: z.string().min(1).optional(),
      from_instance: InstanceName.optional(),
      name_hint: z.string().regex(
        /^[a-z0-9][a-z0-9-]{0,15}$/,
        "1-16 of a-z0-9- starting with a letter or digit",
      ).optional(),
      purpose: z.string().optional(),
      idempotency_key: IdempotencyKey.optional(),
    }),
  output: () =>
    z.strictObject({
      instance: z.string(),
      template: z.string(),
      purpose: z.string().optional(),
      forked_from: z.string().optional(),
      ip: z.string().optional(),
      workdir: z.string(),
      tools: z.array(z.string()),
      supports_delegate: z.boolean(),
      replayed: z.boolean().optional(),
    }),
  hints: { readOnly: false, destructive: false, idempotent: false },
  taskSupport: "optional",
  async run(args, { session: s, progress }) {
    if ((args.template === undefined) === (args.from_instance === undefined)) {
      throw new RefusalError(
        "invalid_argument",
        "create_instance: give exactly one of template and from_instance",
      );
    }
    let purpose: string | undefined;
    if (args.purpose !== undefined) {
      purpose = cleanPurpose(args.purpose);
      if (purpose === undefined) {
        throw new RefusalError("invalid_argument", "purpose: at most 200 characters on one line");
      }
    }
    progress(`creating an instance of ${args.template ?? args.from_instance}`);
    const r = await createInstance(s, {
      ...(args.template ? { template: args.template } : {}),
      ...(args.from_instance ? { from_instance: args.from_instance } : {}),
      ...(args.name_hint ? { name_hint: args.name_hint } : {}),
      ...(purpose ? { purpose } : {}),
      ...(args.idempotency_key ? { idempotency_key: args.idempotency_key } : {}),
    });
    return {
      structured: r as unknown as Record<string, unknown>,
      audit: r.replayed
        ? `replayed key=${args.idempotency_key}`
        : r.forked_from
        ? "forked"
        : "created",
      ...(r.replayed
        ? { note: "Nothing new was made: this key already made this instance (replayed)." }
        : {}),
    };
  },
});

const Entry = once(() =>
  z.strictObject({
    instance: z.string(),
    template: z.string(),
    purpose: z.string().optional(),
    created: IsoTime,
    state: z.enum(["creating", "ready", "held", "orphaned"]),
    kept: z.boolean(),
    held_by: z.string().optional(),
    held_by_client: z.string().optional(),
    orphaned_since: IsoTime.optional(),
    orphan_until: IsoTime.optional(),
    dormant_since: IsoTime.optional(),
    dormant_until: IsoTime.optional(),
    tasks: z.array(z.strictObject({ task_id: TaskId, kind: TaskKind, state: TaskState })),
  })
);

/** `dormant_since`/`dormant_until` of an orphan the sweep stopped as dormant (§2.3). */
function dormantFields(st: Record<string, string>, graceHours: number) {
  const since = dormantSince(st);
  if (since === undefined) return {};
  return {
    dormant_since: new Date(since).toISOString(),
    dormant_until: new Date(since + graceHours * 3_600_000).toISOString(),
  };
}

const list = tool({
  name: "list_instances",
  description:
    "List your instances: those this session holds (with their tasks as last seen), those other sessions hold, and orphans you can adopt.",
  input: () => z.strictObject({}),
  output: () => z.strictObject({ instances: z.array(Entry()) }),
  hints: { readOnly: true, idempotent: true },
  async run(_args, { session: s }) {
    const cfg = s.deps.readConfig();
    const out: z.infer<ReturnType<typeof Entry>>[] = [];
    for (const inst of await userInstances(s)) {
      const st = readStamps(inst.config);
      const standing = s.standingOf(inst);
      const base = {
        instance: inst.name,
        template: st[STAMP.profile] ?? "",
        ...(st[MCP_STAMP.purpose] ? { purpose: st[MCP_STAMP.purpose] } : {}),
        created: inst.created_at,
        kept: Boolean(st[MCP_STAMP.kept]),
      };
      const held = s.held.get(inst.name);
      if (held && (standing.kind === "mine" || standing.kind === "kept")) {
        const tasks = [...s.tasks.values()].filter((t) => t.instance === inst.name)
          .map((t) => ({ task_id: t.id, kind: t.kind, state: t.state }));
        out.push({ ...base, state: held.state, tasks });
      } else if (standing.kind === "held_elsewhere") {
        out.push({
          ...base,
          state: "held",
          held_by: standing.session,
          held_by_client: standing.client,
          tasks: [],
        });
      } else if (standing.kind === "orphan") {
        const since = orphanSince(st);
        const until = since
          ? new Date(Date.parse(since) + cfg.orphanGraceHours * 3_600_000).toISOString()
          : undefined;
        out.push({
          ...base,
          state: "orphaned",
          ...(since ? { orphaned_since: since } : {}),
          ...(until ? { orphan_until: until } : {}),
          ...dormantFields(st, cfg.dormantGraceHours),
          tasks: [],
        });
      }
    }
    return { structured: { instances: out } };
  },
});

/** list_templates, create_instance, list_instances and the lifecycle tools. */
export const instanceTools = [listTemplates, create, list, ...lifecycleTools];
