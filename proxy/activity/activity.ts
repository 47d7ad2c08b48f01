/**
 * The `/activity` wire format of the counting proxy (shared/spec/isx-mcp.md §7.D) and the
 * "natural record" that `isx proxy activity --json` and the MCP tool `instance_activity`
 * derive from it (§7.F, seed "Telling working from stuck").
 *
 * The wire keeps the original's field names (`in_flight`, epoch-millisecond times, time
 * fields omitted until set) and only appends: `idle_seconds`, the `traffic_*` counters,
 * `refused` and the top-level `model_usage_providers`. The record renames nothing either; it is what a
 * script reads: ISO-8601 times with offset, `null` for absent values. Pure: `mcp/` imports
 * this module for the types and the parser.
 *
 * @module
 */

import { integer, list, mapping, type Path, string } from "../config/shape.ts";

/** Whose model calls the token counters cover. */
export type ModelProvider = "anthropic" | "openai";

/** One instance's counters as `/activity` answers them. */
export interface ActivityEntry {
  /** Epoch ms when these counters were created (one incarnation of the name). */
  counting_since: number;
  /** Model calls started. */
  requests: number;
  /** Model calls in flight. */
  in_flight: number;
  /** Start of the last model call. */
  last_request_at?: number;
  /** End of the last model call. */
  last_response_at?: number;
  /** Input tokens (cache reads excluded). */
  input_tokens: number;
  /** Output tokens. */
  output_tokens: number;
  /** Input tokens read from the prompt cache. */
  cache_read_input_tokens: number;
  /** Input tokens written to the prompt cache. */
  cache_creation_input_tokens: number;
  /** Whole seconds since `last_response_at`; present only while nothing is in flight. */
  idle_seconds?: number;
  /** Every request through the proxy (model calls, downloads, git, tunnels, WebSockets). */
  traffic_requests: number;
  /** Requests, tunnels and WebSockets open now. */
  traffic_requests_in_flight: number;
  /** Bytes the instance sent through the proxy (request heads and bodies, tunnel upload). */
  traffic_bytes_sent: number;
  /** Bytes the instance received through the proxy. */
  traffic_bytes_received: number;
  /** WebSockets open now (each also counts as a request in flight while open). */
  traffic_websockets_in_flight: number;
  /** Start of the last proxied request. */
  traffic_last_request_at?: number;
  /** End of the last proxied request. */
  traffic_last_response_at?: number;
  /** Connections refused over the per-instance cap (appended; older proxies lack it). */
  refused?: number;
}

/** The whole `/activity` body. */
export interface ActivityWire {
  /** Counters per instance name. */
  instances: Record<string, ActivityEntry>;
  /** Providers whose model calls the token counters include. */
  model_usage_providers: ModelProvider[];
}

/** The natural record of §7.F: one instance, ISO times with offset, `null` when absent. */
export interface ActivityRecord {
  /** Instance name. */
  instance: string;
  /** When these counters began. */
  counting_since: string | null;
  /** Model calls made. */
  requests: number;
  /** Model calls in flight. */
  requests_in_flight: number;
  /** Start of the last model call. */
  last_request_at: string | null;
  /** End of the last model call. */
  last_response_at: string | null;
  /** Seconds since the last model call ended; null while one is in flight. */
  idle_seconds: number | null;
  /** Input tokens (cache reads excluded). */
  input_tokens: number;
  /** Output tokens. */
  output_tokens: number;
  /** Input tokens read from the prompt cache. */
  cache_read_input_tokens: number;
  /** Input tokens written to the prompt cache. */
  cache_creation_input_tokens: number;
  /** Providers whose model calls the token counts cover. */
  model_usage_providers: ModelProvider[];
  /** Every request through the proxy. */
  traffic_requests: number;
  /** Requests, tunnels and WebSockets open now. */
  traffic_requests_in_flight: number;
  /** Bytes the instance sent. */
  traffic_bytes_sent: number;
  /** Bytes the instance received. */
  traffic_bytes_received: number;
  /** WebSockets open now. */
  traffic_websockets_in_flight: number;
  /** Start of the last proxied request. */
  traffic_last_request_at: string | null;
  /** End of the last proxied request. */
  traffic_last_response_at: string | null;
  /** Connections refused over the per-instance cap. */
  refused: number;
}

/** The record's fields in their fixed output order (plain/table columns). */
export const RECORD_FIELDS: readonly (keyof ActivityRecord)[] = [
  "instance",
  "counting_since",
  "requests",
  "requests_in_flight",
  "last_request_at",
  "last_response_at",
  "idle_seconds",
  "input_tokens",
  "output_tokens",
  "cache_read_input_tokens",
  "cache_creation_input_tokens",
  "model_usage_providers",
  "traffic_requests",
  "traffic_requests_in_flight",
  "traffic_bytes_sent",
  "traffic_bytes_received",
  "traffic_websockets_in_flight",
  "traffic_last_request_at",
  "traffic_last_response_at",
  "refused",
];

const COUNTS = [
  "counting_since",
  "requests",
  "in_flight",
  "input_tokens",
  "output_tokens",
  "cache_read_input_tokens",
  "cache_creation_input_tokens",
] as const;
/** Appended counters: older proxies lack them (0). */
const APPENDED = [
  "traffic_requests",
  "traffic_requests_in_flight",
  "traffic_bytes_sent",
  "traffic_bytes_received",
  "traffic_websockets_in_flight",
  "refused",
] as const;
const TIMES = [
  "last_request_at",
  "last_response_at",
  "idle_seconds",
  "traffic_last_request_at",
  "traffic_last_response_at",
] as const;

function checkEntry(v: unknown, p: Path): ActivityEntry {
  const count = (x: unknown, q: Path) => integer(x, q, 0, Number.MAX_SAFE_INTEGER);
  const e: Record<string, unknown> = { ...mapping(v, p) }; // unknown fields kept
  for (const k of COUNTS) e[k] = count(e[k], [...p, k]);
  for (const k of APPENDED) e[k] = e[k] === undefined ? 0 : count(e[k], [...p, k]);
  for (const k of TIMES) if (e[k] !== undefined) count(e[k], [...p, k]);
  return e as unknown as ActivityEntry;
}

/** Parses an `/activity` body (older proxies without the appended fields included). */
export function parseActivity(json: unknown): ActivityWire {
  try {
    const w: Record<string, unknown> = { ...mapping(json, []) };
    const instances: Record<string, ActivityEntry> = {};
    for (const [name, e] of Object.entries(mapping(w.instances, ["instances"]))) {
      Object.defineProperty(instances, name, {
        value: checkEntry(e, ["instances", name]),
        enumerable: true,
      });
    }
    w.instances = instances;
    w.model_usage_providers = w.model_usage_providers === undefined
      ? ["anthropic"]
      : list(w.model_usage_providers, ["model_usage_providers"], (x, q) =>
        string(x, q, { re: /^(anthropic|openai)$/, what: "anthropic or openai" }));
    return w as unknown as ActivityWire;
  } catch (e) {
    throw new TypeError(`parse /activity: ${(e as Error).message}`);
  }
}

/** Serialises an `/activity` body. */
export function encodeActivity(wire: ActivityWire): string {
  return JSON.stringify(wire);
}

/** ISO-8601 with the local offset (`2026-11-30T10:04:05.123+01:00`), as isx prints times. */
export function isoWithOffset(
  ms: number,
  offsetMinutes = -new Date(ms).getTimezoneOffset(),
): string {
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, -1);
  const sign = offsetMinutes < 0 ? "-" : "+";
  const abs = Math.abs(offsetMinutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, "0");
  const mm = String(abs % 60).padStart(2, "0");
  return `${local}${sign}${hh}:${mm}`;
}

function iso(ms: number | undefined, offset: number | undefined): string | null {
  if (ms === undefined) return null;
  return offset === undefined ? isoWithOffset(ms) : isoWithOffset(ms, offset);
}

/** The record of one instance; `entry` undefined means the proxy does not know it. */
export function toRecord(
  instance: string,
  wire: Pick<ActivityWire, "model_usage_providers"> & { entry: ActivityEntry | undefined },
  opts: { offsetMinutes?: number } = {},
): ActivityRecord {
  const e = wire.entry;
  const o = opts.offsetMinutes;
  return {
    instance,
    counting_since: e ? iso(e.counting_since, o) : null,
    requests: e?.requests ?? 0,
    requests_in_flight: e?.in_flight ?? 0,
    last_request_at: iso(e?.last_request_at, o),
    last_response_at: iso(e?.last_response_at, o),
    idle_seconds: e?.idle_seconds ?? null,
    input_tokens: e?.input_tokens ?? 0,
    output_tokens: e?.output_tokens ?? 0,
    cache_read_input_tokens: e?.cache_read_input_tokens ?? 0,
    cache_creation_input_tokens: e?.cache_creation_input_tokens ?? 0,
    model_usage_providers: [...wire.model_usage_providers],
    traffic_requests: e?.traffic_requests ?? 0,
    traffic_requests_in_flight: e?.traffic_requests_in_flight ?? 0,
    traffic_bytes_sent: e?.traffic_bytes_sent ?? 0,
    traffic_bytes_received: e?.traffic_bytes_received ?? 0,
    traffic_websockets_in_flight: e?.traffic_websockets_in_flight ?? 0,
    traffic_last_request_at: iso(e?.traffic_last_request_at, o),
    traffic_last_response_at: iso(e?.traffic_last_response_at, o),
    refused: e?.refused ?? 0,
  };
}

/** Every instance's record, sorted by name. */
export function toRecords(
  wire: ActivityWire,
  opts: { offsetMinutes?: number } = {},
): ActivityRecord[] {
  return Object.keys(wire.instances).sort().map((name) =>
    toRecord(name, {
      model_usage_providers: wire.model_usage_providers,
      entry: wire.instances[name],
    }, opts)
  );
}
