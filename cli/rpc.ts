/**
 * `isb rpc`: builds the Incus client from the global flags and the sandbox engine on top of
 * it, then serves the SDK protocol on stdin/stdout until stdin ends (shared/spec/isb-rpc.md
 * §1). Only this file touches the process; the server itself takes streams. The engine (the
 * whole library, with its schemas) is imported while the client reads the hello line.
 *
 * @module
 */

import { parseDuration } from "../rpc/duration.ts";
import type { Engine } from "../rpc/mod.ts";
import { serveRpc } from "../rpc/server/mod.ts";
import { parseCommandArgs } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { importModule } from "./commands.ts";
import { PERMISSIONS } from "./permissions.ts";
import { incusOptions } from "./incus_options.ts";

const HELP = `Usage: isb [--socket PATH | --remote NAME] [--project NAME] [--create-timeout D] rpc

Serves the isb SDK protocol on stdin/stdout: one JSON object per line, UTF-8.
The first line written is the hello, {"isb":"<version>","protocol":1}; then every
request {"id", "method", "params"} gets zero or more events and exactly one reply
with the same id. Requests run concurrently (exec.* in arrival order). When stdin
ends, the server finishes the requests in flight and exits 0. Nothing but protocol
lines is written to stdout; logs go to stderr (level from ISX_LOG). Files are read
only under the working directory (start it from the project's), and never from
~/.ssh or the isx configuration and state, even through a symlink or a bind mount.

Global options (before or after \`rpc\`):
  --socket PATH         Incus unix socket (env INCUS_SOCKET, $INCUS_DIR/unix.socket,
                        default /var/lib/incus/unix.socket)
  --remote NAME|URL     talk to an Incus remote instead of the socket: a name from the
                        incus client's config.yml ($INCUS_CONF or ~/.config/incus, with
                        its client.crt/client.key and servercerts/), or https://HOST:PORT
                        (env INCUS_REMOTE)
  --target MEMBER       cluster member new sandboxes are created on
  --project NAME        default Incus project of every request (env INCUS_PROJECT);
                        a request's own "project" param overrides it
  --org ORG             shorthand for --project isb-ORG (env ISB_ORG)
  --create-timeout D    deadline of instance creation: 90, 90s, 1500ms, 5m (default 10m)

Methods: version, schema, sandbox.{create,ensure,plan,resolve,get,list,remove,start,
stop,restart,wait_ready,add_port,remove_device,exec}, exec.{write,close_stdin,signal,
resize}, volume.{list,get,create,remove}, prune, compose.{load,up,plan,down}.
See docs/rpc.md for params, results and errors.`;

/** The creation deadline from the global flags, checked before anything is served. */
function createTimeout(ctx: CliContext): number | undefined {
  return ctx.global.createTimeout === undefined
    ? undefined
    : parseDuration(ctx.global.createTimeout);
}

/** Builds the client and the engine from the global flags and the environment snapshot. */
export async function buildEngine(ctx: CliContext): Promise<{ engine: Engine; close(): void }> {
  const createMs = createTimeout(ctx);
  // by a computed specifier: Deno would read the library's whole graph before the hello
  const { createEngine, createIncusClient } = await importModule<typeof import("../rpc/mod.ts")>(
    "../rpc/mod.ts",
  );
  const incus = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    ...(createMs === undefined ? {} : { timeouts: { createMs } }),
  });
  const engine = createEngine({
    incus,
    cwd: ctx.perm.cwd,
    env: ctx.env,
    lockDir: ctx.perm.lockDir,
    isbStateDir: ctx.perm.isbStateDir,
    createTimeoutMs: createMs,
    term: ctx.env.TERM || undefined,
    protectedPaths: PERMISSIONS.rpc(ctx.perm).denyRead ?? [],
  });
  return { engine, close: () => incus.close() };
}

/** `isb rpc`. */
export const rpcCommand: Command = {
  name: "rpc",
  progs: ["isb", "isx"],
  summary: "serve the SDK protocol (line-delimited JSON) on stdin/stdout",
  help: HELP,
  mode: () => "rpc",
  async run(rest, ctx) {
    parseCommandArgs(rest, {}, false);
    createTimeout(ctx); // a bad --create-timeout is a usage error, before the hello
    let close = () => {};
    try {
      await serveRpc<Engine>({
        // the plain reader and writer: web streams cost the first answer (rpc/jsonl.ts)
        input: Deno.stdin,
        output: Deno.stdout,
        makeEngine: async () => {
          const built = await buildEngine(ctx);
          close = built.close;
          return built.engine;
        },
      });
    } finally {
      close();
    }
    return 0;
  },
};
