/**
 * Durations as the protocol writes them: `"90"` (seconds), `"90s"`, `"1500ms"`, `"5m"`,
 * `"1.5m"`, `"2h"`, `"1d"`; whitespace trimmed, optional spaces before the unit. Pure.
 *
 * @module
 */

import { invalid } from "./errors.ts";

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  m: 60_000,
  min: 60_000,
  mins: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** Parses a duration to milliseconds; a bad one is `invalid`. Numbers count as seconds. */
export function parseDuration(input: string | number): number {
  if (typeof input === "number") {
    if (!Number.isFinite(input) || input < 0) throw invalid(`invalid duration ${input}`);
    return Math.round(input * 1000);
  }
  const m = /^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([a-z]*)$/i.exec(input.trim());
  const unit = m?.[2]?.toLowerCase() || "s";
  const scale = UNITS[unit];
  if (!m || scale === undefined) {
    throw invalid(`invalid duration "${input}": use e.g. 90s, 1500ms, 5m, 1.5h`);
  }
  return Math.round(Number(m[1]) * scale);
}

/** Renders milliseconds the way messages show them: `500ms`, `30s`, `1.5s`, `5m`, `2m30s`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) {
    const s = ms / 1000;
    return `${Number.isInteger(s) ? s : s.toFixed(1)}s`;
  }
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return s ? `${m}m${s}s` : `${m}m`;
}
