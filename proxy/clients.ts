/**
 * Who is calling: the TCP source address on the bridge → the Incus instance that owns it
 * (shared/spec/isx-mcp.md §7.B).
 *
 * The registry holds one listing of every instance with its addresses, `created_at` (the
 * incarnation counters belong to), the SHA-256 of its per-start secret and its account
 * pins. Each listing gets an increasing view number. It is refreshed when Incus reports a
 * lifecycle event, on a slow timer as a safety net, and on demand when an unknown address
 * calls (at most once per `minRefreshMs`, so a fresh instance is known on its first call and
 * a stranger cannot make us list in a loop). An address claimed by two instances belongs to
 * the single running claimant, else nobody. The Incus side is the small
 * {@link InstanceSource} interface; {@link incusSource} adapts the real client to it.
 *
 * @module
 */

import { type Instance, type InstanceState, log } from "../rpc/mod.ts";
import { followEvents } from "./follow.ts";
import type { CallerRef } from "./counter.ts";

/** The stamp prefix isx writes on instances (isx-mcp.md §4.2). */
export const STAMP = "user.incus-spawn.";

/** What the proxy needs to know about one instance. */
export interface InstanceInfo {
  /** `name`, or `project/name` outside the default project. */
  name: string;
  /** Incus `created_at`: the incarnation counters belong to. */
  created_at: string;
  /** Whether the instance runs now. */
  running: boolean;
  /** Addresses on any interface but `lo`, normalised. */
  addresses: string[];
  /** Hex SHA-256 of the per-start instance secret, when stamped. */
  secretSha256?: string;
  /** Account pins per provider namespace (`user.incus-spawn.account.<ns>`). */
  pins: Record<string, string>;
  /** Its template's `accounts:` (`user.incus-spawn.template-account.<ns>`). */
  templateAccounts?: Record<string, string>;
}

/** Where the registry gets instances from: one listing, and optionally change events. */
export interface InstanceSource {
  /** One listing of every instance. */
  listInstances(): Promise<InstanceInfo[]>;
  /** Any item means "something changed"; ends when `signal` aborts. */
  events?(signal: AbortSignal): AsyncIterable<unknown>;
}

/** A resolved caller. */
export interface Caller extends CallerRef {
  /** The normalised source address. */
  address: string;
  /** Hex SHA-256 of the instance's per-start secret. */
  secretSha256?: string;
  /** Account pins per namespace. */
  pins: Record<string, string>;
  /** Its template's `accounts:` per namespace. */
  templateAccounts?: Record<string, string>;
}

/** What the servers ask: who is this connection, and whom do you know. */
export interface CallerLookup {
  /** The instance owning this source address, if any. */
  identify(addr: { hostname: string; port: number }): Promise<Caller | undefined>;
  /** Every instance of the current listing; `undefined` before the first listing. */
  known(): CallerRef[] | undefined;
}

/** `::ffff:10.0.0.1` → `10.0.0.1`; lower case; zone ids dropped. */
export function normalizeAddress(a: string): string {
  let s = a.trim().toLowerCase().replace(/^\[|\]$/g, "");
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  return s.startsWith("::ffff:") && s.includes(".") ? s.slice(7) : s;
}

/** Address → owner, by the rule: one claimant, or the single running one of several. */
export function addressMap(instances: readonly InstanceInfo[]): Map<string, InstanceInfo> {
  const claims = new Map<string, InstanceInfo[]>();
  for (const i of instances) {
    for (const a of new Set(i.addresses.map(normalizeAddress))) {
      const list = claims.get(a) ?? [];
      list.push(i);
      claims.set(a, list);
    }
  }
  const out = new Map<string, InstanceInfo>();
  for (const [a, list] of claims) {
    const running = list.filter((i) => i.running);
    const owner = list.length === 1 ? list[0] : running.length === 1 ? running[0] : undefined;
    if (owner) out.set(a, owner);
  }
  return out;
}

/** Options of {@link ClientRegistry}. */
export interface RegistryOptions {
  now: () => number;
  /** Least time between listings caused by unknown callers (default 1000 ms). */
  minRefreshMs?: number;
  /** Safety-net refresh period (default 30 s). */
  periodMs?: number;
}

/** The address registry, kept fresh from a {@link InstanceSource}. */
export class ClientRegistry implements CallerLookup {
  readonly #source: InstanceSource;
  readonly #now: () => number;
  readonly #minRefreshMs: number;
  readonly #periodMs: number;
  #view = 0;
  #byAddress = new Map<string, InstanceInfo>();
  #all: InstanceInfo[] | undefined;
  #lastList = -Infinity;
  #pending: Promise<void> | undefined;
  #abort = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #loop: Promise<void> | undefined;

  /** Creates it (nothing runs until a start or a call). */
  constructor(source: InstanceSource, opts: RegistryOptions) {
    this.#source = source;
    this.#now = opts.now;
    this.#minRefreshMs = opts.minRefreshMs ?? 1000;
    this.#periodMs = opts.periodMs ?? 30_000;
  }

  /** Lists now (joining a listing already in progress). */
  refresh(): Promise<void> {
    this.#pending ??= (async () => {
      try {
        const list = await this.#source.listInstances();
        this.#view++;
        this.#all = list;
        this.#byAddress = addressMap(list);
      } catch (e) {
        log.warn("proxy: listing instances failed", { error: String((e as Error)?.message ?? e) });
      } finally {
        this.#lastList = this.#now();
        this.#pending = undefined;
      }
    })();
    return this.#pending;
  }

  /** Starts the event subscription and the safety-net timer; the first listing runs in the background. */
  start(): Promise<void> {
    const tick = () => {
      this.refresh().finally(() => {
        if (!this.#abort.signal.aborted) this.#timer = setTimeout(tick, this.#periodMs);
      });
    };
    this.#timer = setTimeout(tick, this.#periodMs);
    const events = this.#source.events;
    if (events) {
      this.#loop = followEvents(events.bind(this.#source), {
        signal: this.#abort.signal,
        onEvent: () => this.refresh(),
        what: "event stream",
      });
    }
    return this.refresh();
  }

  /** Stops following Incus. A listing in progress is not waited for (Incus may be slow). */
  async close(): Promise<void> {
    this.#abort.abort();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#loop;
  }

  #caller(i: InstanceInfo, address: string): Caller {
    const c: Caller = {
      name: i.name,
      incarnation: i.created_at,
      view: this.#view,
      address,
      pins: i.pins,
    };
    if (i.secretSha256) c.secretSha256 = i.secretSha256;
    if (i.templateAccounts) c.templateAccounts = i.templateAccounts;
    return c;
  }

  /** The instance owning `addr`, listing again once if it is unknown and the last listing is old. */
  async identify(addr: { hostname: string; port: number }): Promise<Caller | undefined> {
    const a = normalizeAddress(addr.hostname);
    let hit = this.#byAddress.get(a);
    if (!hit && (this.#pending || this.#now() - this.#lastList >= this.#minRefreshMs)) {
      await this.refresh();
      hit = this.#byAddress.get(a);
    }
    return hit ? this.#caller(hit, a) : undefined;
  }

  /** Every instance of the current listing. */
  known(): CallerRef[] | undefined {
    return this.#all?.map((i) => ({ name: i.name, incarnation: i.created_at, view: this.#view }));
  }
}

function addressesOf(state: InstanceState | undefined): string[] {
  const out: string[] = [];
  for (const [dev, n] of Object.entries(state?.network ?? {})) {
    if (dev === "lo") continue;
    for (const a of n.addresses ?? []) {
      if (a.scope !== "local") out.push(normalizeAddress(a.address));
    }
  }
  return out;
}

/** Maps one Incus instance (recursion=2, with `state`) to what the proxy needs. */
export function instanceInfo(i: Instance & { state?: InstanceState | null }): InstanceInfo {
  const config = { ...i.config, ...(i.expanded_config ?? {}) };
  const pins: Record<string, string> = {};
  const templateAccounts: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    if (k.startsWith(`${STAMP}account.`) && v) pins[k.slice(STAMP.length + 8)] = v;
    if (k.startsWith(`${STAMP}template-account.`) && v) {
      templateAccounts[k.slice(STAMP.length + 17)] = v;
    }
  }
  const project = i.project && i.project !== "default" ? `${i.project}/` : "";
  const info: InstanceInfo = {
    name: `${project}${i.name}`,
    created_at: i.created_at,
    running: (i.state?.status ?? i.status) === "Running",
    addresses: addressesOf(i.state ?? undefined),
    pins,
    ...(Object.keys(templateAccounts).length ? { templateAccounts } : {}),
  };
  const sha = config[`${STAMP}instance-secret-sha256`];
  if (sha) info.secretSha256 = sha.toLowerCase();
  return info;
}

/** The two calls of the Incus client the registry uses (`IncusClient` satisfies it). */
export interface IncusLike {
  /** One REST call, envelope decoded. */
  call(
    method: string,
    path: string,
    opts: { query: Record<string, string | number | boolean> },
  ): Promise<{ kind: string; metadata?: unknown }>;
  /** Subscribes to `/1.0/events`. */
  events(
    opts: { types: string[]; allProjects: boolean },
  ): Promise<AsyncIterable<{ metadata?: { action?: unknown } }> & { close(): void }>;
}

/** Adapts the Incus client: one listing of every project with state, and lifecycle events. */
export function incusSource(client: IncusLike): InstanceSource {
  return {
    async listInstances() {
      const r = await client.call("GET", "/1.0/instances", {
        query: { recursion: 2, "all-projects": true },
      });
      const list = (r.kind === "sync" ? r.metadata : []) as
        | (Instance & { state?: InstanceState })[]
        | null;
      return (list ?? []).map(instanceInfo);
    },
    async *events(signal: AbortSignal) {
      const stream = await client.events({ types: ["lifecycle"], allProjects: true });
      const stop = () => stream.close();
      signal.addEventListener("abort", stop, { once: true });
      try {
        for await (const ev of stream) {
          if (String(ev.metadata?.action ?? "").startsWith("instance-")) yield ev;
        }
      } finally {
        signal.removeEventListener("abort", stop);
        stream.close();
      }
    },
  };
}
