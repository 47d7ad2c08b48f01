/**
 * `isx mcp`: the MCP server over stdio, for host agents (Claude Code, opencode, any MCP
 * client) and programs. Hands stdin/stdout to the protocol layer at once; the session wired
 * to this host (`mcp_backend.ts`: Incus socket, config, proxy health port, audit log) and
 * the tool table load on the first call that needs them or once the client pauses after the
 * handshake, so an agent's `initialize` and `tools/list` are answered before zod, the
 * templates and the tool table are loaded (issue 11, start-up). SIGTERM ends the session as end of input
 * does (calls cancelled, instances released, never destroyed).
 *
 * @module
 */

import { serveMcp } from "../mcp/server/mod.ts";
import { auditLine, fileAuditor } from "../mcp/audit.ts";
import { log } from "../rpc/log.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { Command } from "./command.ts";
import { importModule } from "./commands.ts";
import type { McpProcessBackend, openMcpBackend } from "./mcp_backend.ts";

/** `isx mcp`. */
export const mcpCommand: Command = {
  name: "mcp",
  progs: ["isx"],
  summary: "serve MCP on stdin/stdout: agents and programs run instances, commands, tasks",
  help: `Usage: isx mcp [--no-preflight] [--caller-instance NAME]

Serves the Model Context Protocol on stdin/stdout (one JSON-RPC message per line), for an
agent on this host or a program of your own. Both MCP eras are answered: clients that
start with initialize (2024-11-05 … 2025-11-25) and stateless 2026-07-28 clients
(server/discover, per-request _meta).

Register it with Claude Code:   claude mcp add -s user isx -- isx mcp
With Codex:                     codex mcp add isx -- isx mcp
Other clients:                  {"mcpServers": {"isx": {"command": "isx", "args": ["mcp"]}}}

Agents may use only the templates approved in ~/.config/isx/mcp.yaml (or the mcp: block
of config.yaml), re-read on every call and never written by isx mcp:
  templates: [tpl-dev]       the only templates agents may use
  max-instances: 8           per user, across sessions, orphans included
  max-concurrent-tasks: 8    background commands, per user
  orphan-grace-hours: 24     how long an orphaned instance lives

The process is the session: it holds what it creates. When input ends (or on SIGTERM)
it releases its instances as orphans, which a later session can adopt. Every action is
logged to ~/.local/state/isx/mcp/mcp.log, credentials scrubbed. See docs/mcp.md.

Options:
  --no-preflight   create and start instances even when the proxy cannot serve them (as
                   isx branch --no-preflight; the CA repair still runs when it answers)
  --caller-instance NAME
                   serve the coordinator NAME (isx branch --mcp-client): the proxy starts
                   this for the agent inside it; the session is the instance
                   (instance:NAME:<grant>), so the end of input releases nothing`,
  mode: () => "mcp",
  async run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      "no-preflight": { type: "boolean" },
      "caller-instance": { type: "string" },
    });
    const skip = values["no-preflight"] === true;
    if (positionals.length) throw new UsageError("isx mcp takes no arguments");
    const caller = values["caller-instance"];
    if (caller !== undefined && !/^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$/.test(caller)) {
      throw new UsageError(`--caller-instance: "${caller}" is not an instance name`);
    }
    // the backend loads after the handshake and tools/list are answered (issue 11); one that
    // cannot open (a bad --remote, say) ends the process with its error
    let opened: Promise<McpProcessBackend> | undefined;
    let failure: { error: unknown } | undefined;
    // the session's id, made here (newSessionId's `<pid>-<start>`) so the connect line the
    // server writes before the session loads carries it too
    const id = `${Deno.pid}-${Date.now()}`;
    const audit = fileAuditor(`${ctx.perm.stateDir}/mcp/mcp.log`);
    const onClient = (c: { era: string; protocol: string; name: string; version: string }) =>
      audit(auditLine({
        session: id,
        tool: "connect",
        outcome: c.era,
        ms: 0,
        detail: `client=${JSON.stringify(c.name)} version=${JSON.stringify(c.version)} ` +
          `protocol=${JSON.stringify(c.protocol)}`,
      }, new Date()));
    const backend = () => {
      opened ??= importModule<{ openMcpBackend: typeof openMcpBackend }>("mcp_backend.ts")
        .then((m) => m.openMcpBackend(ctx, skip, { sessionId: id, ...(caller ? { caller } : {}) }));
      opened.catch((error) => {
        failure ??= { error };
        void server.shutdown();
      });
      return opened;
    };
    const server = serveMcp({
      // the plain reader and writer: web streams cost the first answer (rpc/jsonl.ts)
      input: Deno.stdin,
      output: Deno.stdout,
      backend,
      onClient,
    });
    // a long-lived server must not die of one stray rejection (a guest's exec socket reset
    // while its instance stopped, seen in tests): it is logged, the session goes on
    const onRejection = (e: PromiseRejectionEvent) => {
      e.preventDefault();
      log.warn("isx mcp: unhandled rejection", { error: String(e.reason) });
    };
    globalThis.addEventListener("unhandledrejection", onRejection);
    const stopSweeper = async () => await opened?.then((b) => b.stopSweeper(), () => {});
    const close = async () => await opened?.then((b) => b.close(), () => {});
    const onTerm = () => {
      // a sweep's marked step in flight ends first, so no pending-op mark is left behind
      Promise.all([server.shutdown(), stopSweeper()]).finally(() =>
        close().finally(() => Deno.exit(0))
      );
    };
    Deno.addSignalListener("SIGTERM", onTerm);
    try {
      await server.finished;
      await stopSweeper();
    } finally {
      Deno.removeSignalListener("SIGTERM", onTerm);
      globalThis.removeEventListener("unhandledrejection", onRejection);
      await close();
    }
    if (failure) throw failure.error;
    return 0;
  },
};
