/**
 * Prints the permission flags the program must start with, for the launchers in `bin/`:
 * `deno run $(deno run … cli/flags.ts ARGS) main.ts ARGS`. Reads only the environment, the
 * global flags in ARGS (for `--socket`, `--remote`) and the incus client's config.yml (for
 * its `default-remote`), through the same table as everything else; the
 * launcher names the program in `ISX_PROG` (`isb` runs only rpc, whose flags deny reads).
 *
 * @module
 */

import { splitGlobal } from "./args.ts";
import { launchFlags, launchMode } from "./launch.ts";
import { contextFrom } from "./permissions.ts";
import { followedDefaultRemote, readIfPermitted } from "./perm_context.ts";

if (import.meta.main) {
  const env = (k: string) => Deno.env.get(k);
  let socket: string | undefined;
  let command: string | undefined;
  let remote = false;
  try {
    const parsed = splitGlobal(Deno.args, env);
    socket = parsed.global.socket;
    command = parsed.command;
    // a remote named, or config.yml's default-remote followed (as cli/mod.ts decides it)
    remote = parsed.global.remote !== undefined ||
      followedDefaultRemote(env, {
          socketFlag: parsed.global.socketFlag === true,
          read: readIfPermitted,
        }) !== undefined;
  } catch {
    socket = undefined; // the program itself reports the usage error
  }
  const ctx = contextFrom(env, {
    cwd: Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: new URL("..", import.meta.url).pathname.replace(/\/$/, ""),
    execPath: Deno.env.get("ISX_DENO") || Deno.execPath(),
    ...(socket ? { socket } : {}),
    remote,
  });
  const flags = launchFlags(ctx, launchMode(env("ISX_PROG") ?? "isx", command));
  Deno.stdout.writeSync(new TextEncoder().encode(flags.join("\n") + "\n"));
}
