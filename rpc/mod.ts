/**
 * The isb library's public face: the Incus client, the sandbox engine and the shared
 * pieces (errors, durations, JSONL framing, logging, version). `mcp/`, `proxy/` and
 * `cli/` import this module only; nothing here imports them back.
 *
 * @module
 */

export * from "./errors.ts";
export * from "./duration.ts";
export * from "./jsonl.ts";
export * from "./log.ts";
export * from "./version.ts";
export * from "./incus/mod.ts";
export { createEngine, type Engine, type EngineOptions } from "./sandbox/mod.ts";
export * from "./sandbox/exec.ts";
export * from "./sandbox/exec_user.ts";
