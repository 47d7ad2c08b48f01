/**
 * Per-instance counters: model calls with their token usage, and every request the
 * instance made through the proxy (`traffic_*`), with the incarnation rules of
 * shared/spec/isx-mcp.md §7.C/§7.E.
 *
 * Counters belong to one incarnation of a name (Incus `created_at`). A call or read naming
 * another incarnation from a listing at least as new starts fresh counters with a new
 * `counting_since`; one from an older listing ("view") is counted nowhere, so counters never
 * go back. A read creates counters for every instance the registry knows and drops names no
 * longer listed once nothing of theirs is in flight. Every start hands back a handle whose
 * `end` counts exactly once, however often it is called. Pure: the clock is injected.
 *
 * @module
 */

import type { ActivityEntry, ActivityWire, ModelProvider } from "./activity.ts";
import { addUsage, type Usage, zeroUsage } from "./usage.ts";
import { RefusalLog } from "./refusals.ts";
import { TokenSeries } from "./series.ts";

/** Who a request belongs to, as the address registry resolved it. */
export interface CallerRef {
  /** Instance name (`project/name` outside the default project). */
  name: string;
  /** Incus `created_at` of this incarnation. */
  incarnation: string;
  /** The listing this came from; higher is newer. */
  view: number;
}

/** How a model call ended. */
export interface CallEnd {
  /** An upstream response arrived (a 502 or a reset ends a call without one). */
  responded: boolean;
  /** Usage read from a 2xx body, if any. */
  usage?: Usage;
}

/** A model call in flight. */
export interface ModelCall {
  /** Ends the call (only the first call counts). */
  end(outcome: CallEnd): void;
}

/** A proxied request (or tunnel, or WebSocket) in flight. */
export interface TrafficCall {
  /** Bytes from the instance. */
  sent(n: number): void;
  /** Bytes to the instance. */
  received(n: number): void;
  /** A response (or tunnel/WebSocket establishment) reached the instance. */
  responded(): void;
  /** Ends it (only the first call counts). */
  end(): void;
}

interface Counters {
  incarnation: string;
  view: number;
  since: number;
  requests: number;
  inFlight: number;
  lastRequest?: number;
  lastResponse?: number;
  usage: Usage;
  tRequests: number;
  tInFlight: number;
  tSent: number;
  tReceived: number;
  tWebsockets: number;
  tLastRequest?: number;
  tLastResponse?: number;
  refused: number;
}

/** The counters of every instance on the host. */
export class ActivityCounter {
  readonly #now: () => number;
  readonly #providers: ModelProvider[];
  readonly #map = new Map<string, Counters>();
  /** What was refused, for the dashboard (refusals.ts). */
  readonly refusals: RefusalLog = new RefusalLog();
  /** Tokens over the last hour per instance, for the dashboard (series.ts). */
  readonly series: TokenSeries = new TokenSeries();

  /** Creates it (nothing runs until a start or a call). */
  constructor(opts: { now: () => number; providers: readonly ModelProvider[] }) {
    this.#now = opts.now;
    this.#providers = [...opts.providers];
  }

  /** The counters for this caller's incarnation, or `undefined` if it is outdated. */
  #for(ref: CallerRef): Counters | undefined {
    const cur = this.#map.get(ref.name);
    if (cur && cur.incarnation === ref.incarnation) {
      if (ref.view > cur.view) cur.view = ref.view;
      return cur;
    }
    if (cur && ref.view < cur.view) return undefined;
    const fresh = this.#fresh(ref);
    this.#map.set(ref.name, fresh);
    return fresh;
  }

  #fresh(ref: CallerRef): Counters {
    return {
      incarnation: ref.incarnation,
      view: ref.view,
      since: this.#now(),
      requests: 0,
      inFlight: 0,
      usage: zeroUsage(),
      tRequests: 0,
      tInFlight: 0,
      tSent: 0,
      tReceived: 0,
      tWebsockets: 0,
      refused: 0,
    };
  }

  /** Starts a model call: `requests` +1, in flight +1, `last_request_at` = now. */
  modelCall(ref: CallerRef): ModelCall {
    const c = this.#for(ref);
    if (c) {
      c.requests++;
      c.inFlight++;
      c.lastRequest = this.#now();
    }
    let done = false;
    return {
      end: (outcome) => {
        if (done || !c) return;
        done = true;
        c.inFlight--;
        // however it ended (502, reset, timeout): idleness is measured from the end, so
        // `idle_seconds` is present whenever nothing is in flight (seed 000)
        c.lastResponse = this.#now();
        if (outcome.usage) {
          c.usage = addUsage(c.usage, outcome.usage);
          this.series.add(ref.name, c.lastResponse, outcome.usage);
        }
      },
    };
  }

  /** Starts a proxied request; a WebSocket also counts as open until it ends. */
  traffic(ref: CallerRef, opts: { websocket?: boolean } = {}): TrafficCall {
    const c = this.#for(ref);
    const ws = opts.websocket === true;
    if (c) {
      c.tRequests++;
      c.tInFlight++;
      if (ws) c.tWebsockets++;
      c.tLastRequest = this.#now();
    }
    let done = false;
    return {
      sent: (n) => {
        if (c && n > 0) c.tSent += n;
      },
      received: (n) => {
        if (c && n > 0) c.tReceived += n;
      },
      responded: () => {
        if (c && !done) c.tLastResponse = this.#now();
      },
      end: () => {
        if (done || !c) return;
        done = true;
        c.tInFlight--;
        if (ws) c.tWebsockets--;
        c.tLastResponse = this.#now();
      },
    };
  }

  /** Counts a connection refused over the per-instance cap. */
  refused(ref: CallerRef): void {
    const c = this.#for(ref);
    if (c) c.refused++;
    this.refusals.add(this.#now(), {
      kind: "connection_cap",
      instance: ref.name,
      target: "a new connection",
      reason: "over the per-instance connection cap",
    });
  }

  /** Records a refusal other than the connection cap (the dashboard lists them). */
  refusal(r: Parameters<RefusalLog["add"]>[1]): void {
    this.refusals.add(this.#now(), r);
  }

  /**
   * The `/activity` body. `known` (the registry's current instances) creates counters for
   * each and drops names not in it once idle; `undefined` reports what exists.
   */
  snapshot(known?: readonly CallerRef[]): ActivityWire {
    if (known) {
      const names = new Set<string>();
      for (const ref of known) {
        names.add(ref.name);
        this.#for(ref);
      }
      for (const [name, c] of this.#map) {
        if (!names.has(name) && c.inFlight === 0 && c.tInFlight === 0) {
          this.#map.delete(name);
          this.series.drop(name);
        }
      }
    }
    const now = this.#now();
    const instances: Record<string, ActivityEntry> = {};
    for (const name of [...this.#map.keys()].sort()) {
      instances[name] = entry(this.#map.get(name)!, now);
    }
    return { instances, model_usage_providers: [...this.#providers] };
  }
}

function entry(c: Counters, now: number): ActivityEntry {
  const e: ActivityEntry = {
    counting_since: c.since,
    requests: c.requests,
    in_flight: c.inFlight,
    ...c.usage,
    traffic_requests: c.tRequests,
    traffic_requests_in_flight: c.tInFlight,
    traffic_bytes_sent: c.tSent,
    traffic_bytes_received: c.tReceived,
    traffic_websockets_in_flight: c.tWebsockets,
  };
  if (c.lastRequest !== undefined) e.last_request_at = c.lastRequest;
  if (c.lastResponse !== undefined) e.last_response_at = c.lastResponse;
  if (c.inFlight === 0 && c.lastResponse !== undefined) {
    e.idle_seconds = Math.max(0, Math.floor((now - c.lastResponse) / 1000));
  }
  if (c.tLastRequest !== undefined) e.traffic_last_request_at = c.tLastRequest;
  if (c.tLastResponse !== undefined) e.traffic_last_response_at = c.tLastResponse;
  e.refused = c.refused;
  return e;
}
