/**
 * Vertex access tokens from a configured command (by default `gcloud auth
 * print-access-token`): a {@link CommandSources} whose commands come from each Vertex
 * account's `token_command` and `token_ttl_seconds`, so they follow the same rules as every
 * command-sourced credential (proxy/config/command_source.ts: no shell, bounded time and
 * output, single flight, at most one run per ttl, a 401 forcing at most one more).
 *
 * @module
 */

import type { VertexConfig } from "./credentials.ts";
import { type CommandRef, CommandSources, type RunCommand } from "./command_source.ts";
import type { Secret } from "./secret.ts";

export {
  COMMAND_MAX_BYTES as TOKEN_MAX_BYTES,
  COMMAND_TIMEOUT_MS as TOKEN_TIMEOUT_MS,
  type RunCommand,
  runCommand,
} from "./command_source.ts";

/** The command source of a Vertex account. */
export function vertexRef(config: VertexConfig): CommandRef {
  return { kind: "command", argv: config.tokenCommand, ttlMs: config.tokenTtlMs };
}

/** Tokens per command, cached until their TTL passes. */
export class VertexTokens extends CommandSources {
  /** Creates it with a runner and a clock. */
  constructor(opts: { run?: RunCommand; now?: () => number } = {}) {
    super({ ...opts, what: "a Vertex access token" });
  }

  /** A token for this account: cached, or from one run of its command. */
  get(config: VertexConfig): Promise<Secret> {
    return this.value(vertexRef(config));
  }
}
