/**
 * Token counts over time, per instance: the last hour in {@link BUCKET_MS} buckets, fed as
 * each model call ends (no timer, so it costs nothing while no call is made and nobody
 * looks). Each bucket holds the tokens of the calls that ended in it; the dashboard draws
 * them (proxy/dashboard). Bounded: {@link BUCKETS} per instance, dropped with the
 * instance's counters. Pure: the clock is the caller's.
 *
 * @module
 */

import type { Usage } from "./usage.ts";

/** One bucket's width. */
export const BUCKET_MS = 10_000;
/** Buckets kept: one hour. */
export const BUCKETS = 360;

/** One instance's series, oldest first: bucket start (epoch s) and tokens per kind. */
export interface TokenSeriesWire {
  /** Bucket starts, epoch seconds. */
  t: number[];
  /** Input tokens (cache reads excluded). */
  input: number[];
  /** Output tokens. */
  output: number[];
  /** Input tokens read from the prompt cache. */
  cache_read: number[];
  /** Input tokens written to the prompt cache. */
  cache_creation: number[];
}

interface Bucket {
  start: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

/** The series of every instance that made a call in the last hour. */
export class TokenSeries {
  readonly #map = new Map<string, Bucket[]>();

  /** Adds a call's usage, ended at `at`, to `name`'s bucket. */
  add(name: string, at: number, u: Usage): void {
    const start = at - (at % BUCKET_MS);
    let list = this.#map.get(name);
    if (!list) this.#map.set(name, list = []);
    let b = list.at(-1);
    if (!b || b.start < start) {
      list.push(b = { start, input: 0, output: 0, cacheRead: 0, cacheCreation: 0 });
    } else if (b.start > start) return; // a clock step back: counted in the newest bucket's place
    b.input += u.input_tokens;
    b.output += u.output_tokens;
    b.cacheRead += u.cache_read_input_tokens;
    b.cacheCreation += u.cache_creation_input_tokens;
    const oldest = start - (BUCKETS - 1) * BUCKET_MS;
    while (list.length && list[0]!.start < oldest) list.shift();
  }

  /** Forgets `name` (its counters were dropped). */
  drop(name: string): void {
    this.#map.delete(name);
  }

  /** `name`'s buckets of the hour before `now`, or undefined when it has none. */
  read(name: string, now: number): TokenSeriesWire | undefined {
    const oldest = now - now % BUCKET_MS - (BUCKETS - 1) * BUCKET_MS;
    const list = (this.#map.get(name) ?? []).filter((b) => b.start >= oldest);
    if (!list.length) return undefined;
    return {
      t: list.map((b) => b.start / 1000),
      input: list.map((b) => b.input),
      output: list.map((b) => b.output),
      cache_read: list.map((b) => b.cacheRead),
      cache_creation: list.map((b) => b.cacheCreation),
    };
  }
}
