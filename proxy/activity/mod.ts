/**
 * Counting: per-instance counters of model calls, tokens and traffic (`counter.ts`), token
 * usage read out of responses as they stream past (`usage.ts`), the `/activity` wire format and
 * the natural record `isx proxy activity` and `instance_activity` derive from it
 * (`activity.ts`), and how the records are shown (`_format.ts`); for the dashboard, the
 * last refusals with their fixes (`refusals.ts`) and tokens over the last hour
 * (`series.ts`). Pure.
 *
 * @module
 */

export * from "./activity.ts";
export type { CallEnd, CallerRef, ModelCall, TrafficCall } from "./counter.ts";
export type { Usage } from "./usage.ts";
export { ActivityCounter } from "./counter.ts";
export * from "./_format.ts";
export * from "./refusals.ts";
export * from "./series.ts";
