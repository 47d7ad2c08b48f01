/**
 * Sessions and ownership (shared/spec/isx-mcp.md §4): one `isx mcp` process is one session,
 * the holder of what it creates or adopts, in both MCP eras. See `session.ts`.
 *
 * @module
 */

export * from "./config.ts";
export * from "./holding.ts";
export * from "../audit.ts";
export * from "../host/session_locks.ts";
export * from "./types.ts";
export * from "./session.ts";
export { engineTasks } from "./tasks.ts";
export { type MarkGuard, sweepOrphans, type SweepOutcome } from "./sweep.ts";
export * from "./sweeper.ts";
export * from "./dormancy.ts";
export { type ReholdOutcome, reholdSession } from "./rehold.ts";
