/**
 * What the page shows, as one JSON document built from what the proxy already holds: the
 * registry's last Incus listing (kept as slim {@link InstanceFacts} when it is made, so a
 * view reads no Incus), the counters, the token series, the refusal log, the task board and
 * `/health`. Only instances isx made (a `type` stamp of `instance` or `build`) are shown;
 * times are epoch ms and nothing in the document depends on the clock alone (ages and idle
 * seconds are computed by the page), so two views of an unchanged proxy are the same bytes
 * and the stream sends nothing. Pure.
 *
 * @module
 */

import type { Instance, InstanceState } from "../../rpc/base.ts";
import type { ActivityEntry, ActivityWire } from "../activity/activity.ts";
import type { Refusal } from "../activity/refusals.ts";
import type { TokenSeriesWire } from "../activity/series.ts";
import type { TaskRow } from "./tasks.ts";

const STAMP = "user.incus-spawn.";

/** One instance as the dashboard needs it (projected from a listing once). */
export interface InstanceFacts {
  /** `name`, or `project/name` outside the default project. */
  name: string;
  /** Incus status (`Running`, `Stopped`, …). */
  status: string;
  /** Incus `created_at`. */
  created_at: string;
  /** The isx stamps, prefix-less (`profile`, `network`, `mcp-session`, …). */
  stamps: Record<string, string>;
  /** Its IPv4 address: the NIC's configured one, else what the guest reports on eth0. */
  address: string | null;
}

/** Projects one listed instance (Incus `recursion=2`). */
export function instanceFacts(i: Instance & { state?: InstanceState | null }): InstanceFacts {
  const stamps: Record<string, string> = {};
  for (const [k, v] of Object.entries(i.config ?? {})) {
    if (k.startsWith(STAMP)) stamps[k.slice(STAMP.length)] = v;
  }
  const devices = { ...i.devices, ...(i.expanded_devices ?? {}) };
  const configured = Object.values(devices).find((d) => d.type === "nic" && d["ipv4.address"])?.[
    "ipv4.address"
  ];
  const reported = Object.entries(i.state?.network ?? {}).filter(([n]) => n !== "lo")
    .flatMap(([, n]) => n.addresses).find((a) => a.family === "inet" && a.scope === "global")
    ?.address;
  const project = i.project && i.project !== "default" ? `${i.project}/` : "";
  return {
    name: `${project}${i.name}`,
    status: i.state?.status ?? i.status,
    created_at: i.created_at,
    stamps,
    address: configured ?? reported ?? null,
  };
}

/** Keeps the last listing's facts (the registry's `onRaw` hands them over). */
export class InstanceShelf {
  #facts: InstanceFacts[] | undefined;
  readonly #watchers = new Set<() => void>();

  /** Replaces the facts with this listing's (and tells the watchers: open pages). */
  set(list: readonly (Instance & { state?: InstanceState | null })[]): void {
    this.#facts = list.map(instanceFacts);
    for (const fn of this.#watchers) fn();
  }

  /** Calls `fn` after every listing; returns the unsubscribe. */
  watch(fn: () => void): () => void {
    this.#watchers.add(fn);
    return () => this.#watchers.delete(fn);
  }

  /** The last listing's facts; undefined before the first. */
  get(): readonly InstanceFacts[] | undefined {
    return this.#facts;
  }
}

/** The `/health` fields the page shows (proxy/host's `HealthInfo` has them all). */
export interface HealthInfo {
  /** The proxy's isx version. */
  version: string;
  /** Its pid. */
  pid: number;
  /** The CA it signs with (SHA-256). */
  caFingerprint: string;
  /** The bridge's DNS holds the proxy's block. */
  dnsConfigured: boolean;
  /** The proxy manages the bridge's DNS. */
  dnsManaged: boolean;
  /** A restart-only part of the config changed since start. */
  configDrifted: boolean;
  /** Which files drifted. */
  configDriftedFiles: string[];
  /** What is wrong with the credentials file now (never a value). */
  authError: string | null;
  /** Namespaces without an account. */
  missingCredentials: string[];
  /** When it started (ms since the epoch). */
  startedAt: number;
  /** Its listeners by role. */
  listen: Record<string, string>;
}

/** Who holds an instance, from its MCP stamps. */
export interface Holder {
  /** The holding `isx mcp` session. */
  session: string;
  /** Its client's name. */
  client: string | null;
  /** The client's pid, as the session saw it. */
  pid: number | null;
}

/** A warm-pool member's state word, as its `mcp-pool` stamp holds it. */
export type PoolState = "filling" | "ready" | "draining";

/** One instance row of the page. */
export interface InstanceView {
  /** The instance (`<project>/<name>` outside the default project). */
  name: string;
  /** `instance` or `build`. */
  type: string;
  /** The template it was made from. */
  template: string | null;
  /** Incus's status (Running, Stopped, ...). */
  status: string;
  /** When Incus made it. */
  created_at: string;
  /** Its IPv4 address. */
  address: string | null;
  /** full, proxy-only or airgap. */
  network: string | null;
  /** Who holds it. */
  holder: Holder | null;
  /** The purpose stamped at create. */
  purpose: string | null;
  /** held, kept, orphaned, dormant or null (no MCP stamps). */
  standing: "held" | "kept" | "orphaned" | "dormant" | null;
  /**
   * An unclaimed warm-pool member's state (its `mcp-pool` stamp, mcp/pool/members.ts):
   * `filling` while the keeper makes it, `ready` to be claimed, `draining` while removed;
   * null for every other instance (a claim clears the stamp).
   */
  pool: PoolState | null;
  /** Trusts another CA than the proxy's; null when it records none. */
  ca_outdated: boolean | null;
  /** The counters (`/activity`'s entry without `idle_seconds`, which the page computes). */
  activity: Omit<ActivityEntry, "idle_seconds"> | null;
  /** Tokens over the last hour. */
  series: TokenSeriesWire | null;
}

/** The proxy's health as the page shows it. */
export interface HealthView {
  /** `running`, or `degraded` with the reasons in `problems`. */
  state: "running" | "degraded";
  /** Each problem with what to do. */
  problems: string[];
  /** The proxy's isx version. */
  version: string;
  /** Its pid. */
  pid: number;
  /** When it started (ms since the epoch). */
  started_at: number;
  /** The CA it signs with. */
  ca_fingerprint: string;
  /** Namespaces without an account. */
  missing_credentials: string[];
  /** Files changed since start that need a restart. */
  config_drifted_files: string[];
  /** Its listeners by role. */
  listen: Record<string, string>;
}

/** The whole document. */
export interface DashboardView {
  /** The proxy's health. */
  health: HealthView;
  /** Every instance the registry lists. */
  instances: InstanceView[];
  /** The tasks isx mcp reported. */
  tasks: TaskRow[];
  /** The latest refusals. */
  refusals: Refusal[];
  /** Providers whose usage the proxy reads. */
  model_usage_providers: string[];
}

/** The health block and its problems, each with what to do. */
export function healthView(h: HealthInfo): HealthView {
  const problems: string[] = [];
  if (h.authError) {
    problems.push(`credentials.yaml: ${h.authError} (fix it, then isx proxy restart)`);
  }
  if (h.configDrifted) {
    problems.push(
      `changed since start: ${h.configDriftedFiles.join(", ")} (isx proxy restart applies it)`,
    );
  }
  if (h.dnsManaged && !h.dnsConfigured) {
    problems.push("the bridge DNS does not point at the proxy (isx proxy restart sets it)");
  }
  if (h.missingCredentials.length) {
    problems.push(
      `no credential for ${h.missingCredentials.join(", ")} (add one: isx proxy account add)`,
    );
  }
  return {
    state: problems.length ? "degraded" : "running",
    problems,
    version: h.version,
    pid: h.pid,
    started_at: h.startedAt,
    ca_fingerprint: h.caFingerprint,
    missing_credentials: h.missingCredentials,
    config_drifted_files: h.configDriftedFiles,
    listen: h.listen,
  };
}

function standing(s: Record<string, string>): InstanceView["standing"] {
  if (s["mcp-dormant"]) return "dormant";
  if (s["mcp-orphaned"]) return "orphaned";
  if (s["mcp-kept"]) return "kept";
  if (s["mcp-session"]) return "held";
  return null;
}

// the same reading as mcp/pool/members.ts's memberState (the proxy does not import mcp/):
// any other value, the empty one a claim leaves included, is no member
function poolState(s: Record<string, string>): PoolState | null {
  const v = s["mcp-pool"];
  return v === "filling" || v === "ready" || v === "draining" ? v : null;
}

/** Builds the document. */
export function buildView(input: {
  instances: readonly InstanceFacts[] | undefined;
  activity: ActivityWire;
  series: (name: string) => TokenSeriesWire | undefined;
  tasks: readonly TaskRow[];
  refusals: readonly Refusal[];
  health: HealthInfo;
}): DashboardView {
  const ca = input.health.caFingerprint;
  const instances = (input.instances ?? [])
    .filter((f) => f.stamps.type === "instance" || f.stamps.type === "build")
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((f): InstanceView => {
      const s = f.stamps;
      const e = input.activity.instances[f.name];
      let activity: InstanceView["activity"] = null;
      if (e) {
        const { idle_seconds: _, ...rest } = e;
        activity = rest;
      }
      const pid = Number(s["mcp-client-pid"]);
      return {
        name: f.name,
        type: s.type!,
        template: s.profile ?? null,
        status: f.status,
        created_at: f.created_at,
        address: f.address,
        network: s.network ?? null,
        holder: s["mcp-session"]
          ? {
            session: s["mcp-session"],
            client: s["mcp-client"] ?? null,
            pid: Number.isInteger(pid) && pid > 0 ? pid : null,
          }
          : null,
        purpose: s["mcp-purpose"] ?? null,
        standing: standing(s),
        pool: poolState(s),
        ca_outdated: s["ca-sha256"] ? s["ca-sha256"] !== ca : null,
        activity,
        series: input.series(f.name) ?? null,
      };
    });
  const shown = new Set(instances.map((i) => i.name));
  return {
    health: healthView(input.health),
    instances,
    // a task of an instance that is gone is shown until the board forgets it, as lost
    tasks: input.tasks.map((t) =>
      !input.instances || shown.has(t.instance) || t.state !== "running"
        ? t
        : { ...t, state: "lost" as const }
    ),
    refusals: [...input.refusals].reverse(),
    model_usage_providers: input.activity.model_usage_providers,
  };
}
