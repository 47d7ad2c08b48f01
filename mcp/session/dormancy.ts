/**
 * Dormancy (shared/spec/isx-mcp.md §4.4): an orphan past its grace that is kept alive only
 * by an unfinished agent run, with nobody present, is stopped once it has been quiet for
 * `dormant-after-hours`. Quiet means no agent task-file write (age measured by the guest's
 * own clock, so host/guest clock skew cannot fake quiet) and CPU growth under 1% of one CPU
 * between two samples at least an hour apart. The samples live in the `mcp-cpu-sample`
 * stamp (`<time> <cpu-nanos> <quiet-since>`) so the window survives across sessions; every
 * sweep is a fresh process. The decision is pure so its table test covers each rule; the
 * sweep reads the inputs and applies the answer.
 *
 * @module
 */

import { MCP_STAMP } from "./holding.ts";

/** The stamp holding the last CPU sample (prefix-less; see mcp/host/stamps.ts). */
export const CPU_SAMPLE_STAMP: string = MCP_STAMP.cpuSample;

/** Minimum spacing of two compared CPU samples. */
export const SAMPLE_SPACING_MS = 3_600_000;

/** A parsed `mcp-cpu-sample` stamp. */
export interface CpuSample {
  /** Host time of the sample (ms since epoch). */
  at: number;
  /** Cumulative CPU time of the instance then (ns). */
  cpuNanos: number;
  /** Host time since which the instance has been quiet (ms since epoch). */
  quietSince: number;
}

/** What the sweep observed of a running orphan kept only by an agent run. */
export interface DormancyInput {
  /** Host time now (ms). */
  now: number;
  /** `dormant-after-hours` in ms. */
  afterMs: number;
  /** The raw `mcp-cpu-sample` stamp, if any. */
  stamp: string | undefined;
  /** Cumulative CPU time now (ns), undefined when Incus did not say. */
  cpuNanos: number | undefined;
  /** Age of the newest agent task-file write by the guest clock (ms), undefined if unknown. */
  taskWriteAgeMs: number | undefined;
}

/** The sweep's next step: leave the stamp alone, record a new sample, or stop the orphan. */
export type DormancyDecision =
  | { action: "none" }
  | { action: "record"; sample: CpuSample }
  | { action: "stop"; quietSince: number };

/** Reads an `mcp-cpu-sample` stamp; undefined when absent or malformed (pure). */
export function parseCpuSample(stamp: string | undefined): CpuSample | undefined {
  const m = /^(\d{1,16}) (\d{1,20}) (\d{1,16})$/.exec(stamp ?? "");
  if (!m) return undefined;
  const [at, cpuNanos, quietSince] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (quietSince > at) return undefined;
  return { at, cpuNanos, quietSince };
}

/** Writes an `mcp-cpu-sample` stamp (pure). */
export function formatCpuSample(s: CpuSample): string {
  return `${Math.floor(s.at)} ${Math.floor(s.cpuNanos)} ${Math.floor(s.quietSince)}`;
}

/** Decides whether a quiet, agent-only orphan is to be stopped as dormant (pure). */
export function decideDormancy(i: DormancyInput): DormancyDecision {
  const restart = (): DormancyDecision =>
    i.cpuNanos === undefined
      ? { action: "none" }
      : { action: "record", sample: { at: i.now, cpuNanos: i.cpuNanos, quietSince: i.now } };
  const prev = parseCpuSample(i.stamp);
  // missing data restarts the window
  if (!prev || i.cpuNanos === undefined || i.taskWriteAgeMs === undefined) return restart();
  if (prev.at > i.now) return restart(); // host clock went back: trust nothing older
  // a sweep closer than the spacing to the last sample neither compares nor records
  if (i.now - prev.at < SAMPLE_SPACING_MS) return { action: "none" };
  // the counter went down: the instance restarted since the sample
  if (i.cpuNanos < prev.cpuNanos) return restart();
  const elapsedNs = (i.now - prev.at) * 1e6;
  if (i.cpuNanos - prev.cpuNanos >= elapsedNs / 100) return restart(); // ≥ 1% of one CPU
  // a task-file write inside the window moves the start of quiet forward
  const lastWrite = i.now - Math.max(0, i.taskWriteAgeMs);
  const quietSince = Math.max(prev.quietSince, lastWrite);
  if (i.now - quietSince >= i.afterMs) return { action: "stop", quietSince };
  return { action: "record", sample: { at: i.now, cpuNanos: i.cpuNanos, quietSince } };
}
