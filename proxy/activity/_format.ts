/**
 * How `isx proxy activity` shows the records: an aligned table for people (human times
 * like "12s ago", idle instances highlighted), tab-separated lines for scripts (`-` for
 * empty, control characters flattened, one record per line, fixed column order), and JSON
 * (an array of records, `null` for absent). Pure: the clock and colour choice are inputs.
 *
 * @module
 */

import { type ActivityRecord, RECORD_FIELDS } from "./activity.ts";

/** "12s ago", "4m ago", "3h ago", "2d ago"; "-" when unset. */
export function humanAgo(iso: string | null, now: number): string {
  if (!iso) return "-";
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  return `${humanSeconds(s)} ago`;
}

/** 37 → "37s", 125 → "2m05s", 7300 → "2h01m", 200000 → "2d07h". */
export function humanSeconds(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) {
    return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  }
  return `${Math.floor(s / 86400)}d${String(Math.floor(s / 3600) % 24).padStart(2, "0")}h`;
}

/** 1234567 → "1.2M"; counts and bytes alike. */
export function humanCount(n: number, unit = ""): string {
  if (n < 1000) return `${n}${unit}`;
  const steps = ["k", "M", "G", "T"];
  let v = n;
  let i = -1;
  while (v >= 1000 && i < steps.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)}${steps[i]}${unit}`;
}

/** What an instance looks like it is doing. */
export function stateOf(r: ActivityRecord): "working" | "idle" | "busy" | "-" {
  if (r.requests_in_flight > 0) return "working";
  if (r.traffic_requests_in_flight > 0) return "busy";
  if (r.idle_seconds !== null) return "idle";
  return "-";
}

/** The record as one tab-separated line. */
export function plainLine(r: ActivityRecord): string {
  return RECORD_FIELDS.map((k) => {
    const v = r[k];
    if (v === null || v === undefined || (Array.isArray(v) && v.length === 0)) return "-";
    const s = Array.isArray(v) ? v.join(",") : String(v);
    // deno-lint-ignore no-control-regex
    return s.replace(/[\x00-\x1f\x7f]/g, " ");
  }).join("\t");
}

/** Options of {@link activityTable}. */
export interface TableOptions {
  /** The clock (epoch ms). */
  now: number;
  /** ANSI highlight for idle instances. */
  color: boolean;
  /** Idle at least this long is highlighted (default 60 s). */
  idleAfterSeconds?: number;
}

/** The aligned table people read. */
export function activityTable(records: readonly ActivityRecord[], opts: TableOptions): string {
  if (records.length === 0) return "no instances known to the proxy";
  const head = [
    "INSTANCE",
    "STATE",
    "CALLS",
    "LAST CALL",
    "IDLE",
    "TOKENS IN/OUT",
    "CACHE R/W",
    "TRAFFIC",
    "UP/DOWN",
    "SINCE",
    "REFUSED",
  ];
  const rows = records.map((r) => [
    r.instance,
    stateOf(r),
    r.requests_in_flight ? `${r.requests} (${r.requests_in_flight} now)` : String(r.requests),
    humanAgo(r.last_request_at, opts.now),
    r.idle_seconds === null ? "-" : humanSeconds(r.idle_seconds),
    `${humanCount(r.input_tokens)}/${humanCount(r.output_tokens)}`,
    `${humanCount(r.cache_read_input_tokens)}/${humanCount(r.cache_creation_input_tokens)}`,
    `${r.traffic_requests}` +
    (r.traffic_requests_in_flight ? ` (${r.traffic_requests_in_flight} now)` : "") +
    (r.traffic_websockets_in_flight ? ` ws ${r.traffic_websockets_in_flight}` : ""),
    `${humanCount(r.traffic_bytes_sent, "B")}/${humanCount(r.traffic_bytes_received, "B")}`,
    humanAgo(r.counting_since, opts.now),
    String(r.refused),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  const idleAfter = opts.idleAfterSeconds ?? 60;
  const out = [line(head)];
  records.forEach((r, i) => {
    const text = line(rows[i]!);
    const idle = r.idle_seconds !== null && r.idle_seconds >= idleAfter && stateOf(r) === "idle";
    out.push(idle && opts.color ? `\x1b[33m${text}\x1b[0m` : text);
  });
  return out.join("\n");
}
