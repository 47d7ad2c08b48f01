/**
 * Time as the library sees it, apart from the sandbox engine that first needed it, so that
 * code outside the engine (the MCP layer's tasks and networks, through `rpc/base.ts`) waits
 * and measures without loading the engine (issue 11: start-up of `isx mcp` and `isx list`).
 *
 * @module
 */

/** Time as the engine sees it; tests and benchmarks inject their own. */
export interface Clock {
  /** Milliseconds since some fixed point. */
  now(): number;
  /** Resolves after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

/** The real clock. */
export const SYSTEM_CLOCK: Clock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};
