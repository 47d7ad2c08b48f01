/**
 * The isx host layer's public face, what `cli/` imports: templates (definitions, builds),
 * instances (branch, start/stop/destroy, list, shell, network modes, the instance secret)
 * and host set-up (`isx init`, config.yaml's host keys, stamps). The MCP server builds on
 * the same exports and adds its own here.
 *
 * @module
 */

export * from "./host/mod.ts";
export * from "./templates/mod.ts";
export * from "./instances/mod.ts";
export { type McpBackend, type McpServer, serveMcp, type ServeOptions } from "./server/mod.ts";
export {
  engineTasks,
  fileAuditor,
  type McpConfig,
  newSessionId,
  readMcpConfig,
  Session,
  type SessionDeps,
  SessionLocks,
  Sweeper,
  sweepOrphans,
} from "./session/mod.ts";
export { outputSchemas, toolNames } from "./tools/mod.ts";
export { createTaskEngine } from "./tasks/mod.ts";
export { REFUSAL_CODES, type RefusalCode, RefusalError } from "./errors.ts";
