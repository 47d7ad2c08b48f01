/**
 * Who is calling: the TCP source address on the bridge → the Incus instance that owns it
 * (shared/spec/isx-mcp.md §7.B).
 *
 * The registry holds one listing of every instance with its addresses, `created_at` (the
 * incarnation counters belong to), the SHA-256 of its per-start secret and its account
 * pins. Each listing gets an increasing view number. It is refreshed when Incus reports a
 * lifecycle event, on a slow timer as a safety net, and on demand when an unknown address
 * calls (at most once per `minRefreshMs`, so a fresh instance is known on its first call and
 * a stranger cannot make us list in a loop). Which instance owns an address, and what it may
 * be given, is decided in proxy/callers/_identity.ts from the NIC configuration Incus holds, never
 * from what a guest reports about itself. The Incus side is the small
 * {@link InstanceSource} interface; {@link incusSource} adapts the real client to it.
 *
 * @module
 */

import { type Instance, type InstanceState, log } from "../../rpc/base.ts";
import { followEvents } from "./follow.ts";
import type { CallerRef } from "../activity/counter.ts";
import {
  addressMap,
  type InstanceInfo,
  instanceInfo,
  normalizeAddress,
  type Owner,
  STAMP,
} from "./_identity.ts";
import type { Grant } from "../config/policy.ts";

export { addressMap, type InstanceInfo, instanceInfo, normalizeAddress, STAMP };

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
  /** Which credentials it may be given (none unless identified by its pinned NIC). */
  grant: Grant;
  /** Its coordinator grant, only when identified by its pinned NIC (proxy/mcp_endpoint/). */
  mcpCaller?: string;
  /** An unclaimed warm-pool member: answered 403 "not claimed", counted nowhere. */
  pooled?: true;
}

/** What the servers ask: who is this connection, and whom do you know. */
export interface CallerLookup {
  /** The instance owning this source address, if any. */
  identify(addr: { hostname: string; port: number }): Promise<Caller | undefined>;
  /** Every instance of the current listing; `undefined` before the first listing. */
  known(): CallerRef[] | undefined;
}

/** Options of {@link ClientRegistry}. */
export interface RegistryOptions {
  now: () => number;
  /** Least time between listings caused by unknown callers (default 1000 ms). */
  minRefreshMs?: number;
  /** Safety-net refresh period (default 30 s). */
  periodMs?: number;
  /** Runs on every listing before it names any caller (the bridge guard; must not throw). */
  onListing?: (list: readonly InstanceInfo[]) => Promise<void>;
}

/** The address registry, kept fresh from a {@link InstanceSource}. */
export class ClientRegistry implements CallerLookup {
  readonly #source: InstanceSource;
  readonly #now: () => number;
  readonly #minRefreshMs: number;
  readonly #periodMs: number;
  readonly #onListing: RegistryOptions["onListing"];
  #view = 0;
  #byAddress = new Map<string, Owner>();
  #all: InstanceInfo[] | undefined;
  #lastList = -Infinity;
  #pending: Promise<void> | undefined;
  #again: Promise<void> | undefined;
  #abort = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #loop: Promise<void> | undefined;

  /** Creates it (nothing runs until a start or a call). */
  constructor(source: InstanceSource, opts: RegistryOptions) {
    this.#source = source;
    this.#now = opts.now;
    this.#minRefreshMs = opts.minRefreshMs ?? 1000;
    this.#periodMs = opts.periodMs ?? 30_000;
    this.#onListing = opts.onListing;
  }

  /**
   * Lists now. A call while a listing is in progress gets one more listing after it (shared
   * by every such call): that listing may have been read before what the caller heard of
   * (an Incus event, a new address), so joining it would keep the old view until the next.
   */
  refresh(): Promise<void> {
    if (this.#pending) {
      this.#again ??= this.#pending.then(() => {
        this.#again = undefined;
        return this.refresh();
      });
      return this.#again;
    }
    this.#pending = (async () => {
      try {
        const list = await this.#source.listInstances();
        await this.#onListing?.(list);
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

  #caller({ info: i, byConfig }: Owner, address: string): Caller {
    const c: Caller = {
      name: i.name,
      incarnation: i.created_at,
      view: this.#view,
      address,
      pins: i.pins,
      // a guest-reported address names the caller for counting, never for credentials
      grant: byConfig ? i.grant : [],
    };
    if (i.secretSha256) c.secretSha256 = i.secretSha256;
    if (i.templateAccounts) c.templateAccounts = i.templateAccounts;
    if (byConfig && i.mcpCaller) c.mcpCaller = i.mcpCaller;
    if (i.pooled) c.pooled = true;
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

/** The two calls of the Incus client the registry uses (`IncusClient` satisfies it). */
export interface IncusLike {
  /** One REST call, envelope decoded. */
  call(
    method: string,
    path: string,
    opts: { query: Record<string, string | number | boolean>; target?: string },
  ): Promise<{ kind: string; metadata?: unknown }>;
  /** Subscribes to `/1.0/events`. */
  events(
    opts: { types: string[]; allProjects: boolean },
  ): Promise<AsyncIterable<{ metadata?: { action?: unknown } }> & { close(): void }>;
}

/**
 * Whether an Incus lifecycle action can change who owns an address or what it may be given
 * (its NIC, stamps, secret hash, state, name, existence), so the registry lists again. Every
 * `instance-*` action does but those that only read or touch what runs inside a guest: its
 * files (for an Incus that reports them), exec sessions, console and logs, and whatever is
 * `-retrieved`: before, each exec of a task made the proxy list every instance of every project
 * with its state. An action Incus adds later lists again: only known reads are skipped.
 */
export function changesCallers(action: string): boolean {
  if (!action.startsWith("instance-")) return false;
  if (action.endsWith("-retrieved")) return false;
  return !/^instance-(file|log|exec|console)(-|$)/.test(action);
}

/**
 * Adapts the Incus client: one listing of every project with state, and lifecycle events.
 * `onRaw` also gets each listing as Incus sent it (the dashboard keeps its facts from it).
 */
export function incusSource(
  client: IncusLike,
  onRaw?: (list: readonly (Instance & { state?: InstanceState })[]) => void,
): InstanceSource {
  return {
    async listInstances() {
      const r = await client.call("GET", "/1.0/instances", {
        query: { recursion: 2, "all-projects": true },
      });
      const list = (r.kind === "sync" ? r.metadata : []) as
        | (Instance & { state?: InstanceState })[]
        | null;
      onRaw?.(list ?? []);
      return (list ?? []).map(instanceInfo);
    },
    async *events(signal: AbortSignal) {
      const stream = await client.events({ types: ["lifecycle"], allProjects: true });
      const stop = () => stream.close();
      signal.addEventListener("abort", stop, { once: true });
      try {
        for await (const ev of stream) {
          if (changesCallers(String(ev.metadata?.action ?? ""))) yield ev;
        }
      } finally {
        signal.removeEventListener("abort", stop);
        stream.close();
      }
    },
  };
}
