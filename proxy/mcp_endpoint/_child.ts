/**
 * The host `isx mcp --caller-instance <name>` the proxy runs for one coordinator: a child
 * process speaking MCP's stdio framing (one JSON-RPC message per line), started from a
 * {@link ChildSpec} the CLI builds (cli/mcp_child.ts: the program under the `mcp` mode's
 * own permission flags, never the proxy's), so the proxy never gains the MCP layer's rights
 * and the child never holds the proxy's (credentials, the CA key). Stopping is TERM, then
 * KILL when it has not ended within the grace (10 s), as issue 20 asks of a replaced
 * session. The child's stderr goes to the proxy log at debug level; it never carries the
 * instance secret, which the child never sees.
 *
 * @module
 */

import { IsbError, lines, log } from "../../rpc/base.ts";

/** How to start the child for a coordinator. */
export interface ChildSpec {
  /** The executable. */
  command: string;
  /** Its arguments for the coordinator `instance` in `project` (undefined: the default). */
  args(instance: string, project: string | undefined): string[];
  /** Its whole environment (the child gets nothing else). */
  env: Record<string, string>;
  /** Its working directory. */
  cwd?: string;
}

/** A running child. */
export interface McpChild {
  /** Its pid. */
  readonly pid: number;
  /** Sends one message (one line). */
  send(msg: Record<string, unknown>): Promise<void>;
  /** Resolves when it has exited. */
  readonly exited: Promise<void>;
  /** TERM, then KILL after `graceMs`; resolves once it has exited. */
  stop(graceMs: number): Promise<void>;
}

/** Starts the child for `name` (`project/name` outside the default project). */
export function spawnChild(
  spec: ChildSpec,
  name: string,
  onMessage: (msg: Record<string, unknown>) => void,
): McpChild {
  const slash = name.indexOf("/");
  const project = slash > 0 ? name.slice(0, slash) : undefined;
  const bare = slash > 0 ? name.slice(slash + 1) : name;
  const proc = new Deno.Command(spec.command, {
    args: spec.args(bare, project),
    env: spec.env,
    clearEnv: true,
    ...(spec.cwd ? { cwd: spec.cwd } : {}),
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = proc.stdin.getWriter();
  const enc = new TextEncoder();
  let gone = false;
  const reading = (async () => {
    try {
      for await (const line of lines(proc.stdout)) {
        if (!line.trim()) continue;
        let msg: unknown;
        try {
          msg = JSON.parse(line);
        } catch {
          log.warn("proxy: isx mcp wrote a line that is not JSON", { instance: name });
          continue;
        }
        if (msg && typeof msg === "object" && !Array.isArray(msg)) {
          onMessage(msg as Record<string, unknown>);
        }
      }
    } catch { /* the child went away */ }
  })();
  const stderr = (async () => {
    try {
      for await (const line of lines(proc.stderr)) {
        if (line.trim()) log.debug("proxy: isx mcp", { instance: name, line: line.slice(0, 500) });
      }
    } catch { /* the child went away */ }
  })();
  const exited = (async () => {
    await proc.status;
    gone = true;
    await Promise.all([reading, stderr]);
    await writer.close().catch(() => {});
  })();
  return {
    pid: proc.pid,
    exited,
    async send(msg) {
      if (gone) throw new IsbError("io", "isx mcp for this coordinator has ended");
      await writer.write(enc.encode(JSON.stringify(msg) + "\n"));
    },
    async stop(graceMs) {
      if (gone) return await exited;
      // isx mcp's SIGTERM ends the session as the end of input does (calls wound down)
      try {
        proc.kill("SIGTERM");
      } catch { /* already gone */ }
      let timer: ReturnType<typeof setTimeout> | undefined;
      const killed = new Promise<void>((r) => {
        timer = setTimeout(() => {
          try {
            proc.kill("SIGKILL");
          } catch { /* already gone */ }
          r();
        }, graceMs);
      });
      await Promise.race([exited, killed]);
      clearTimeout(timer);
      await exited;
    },
  };
}
