/**
 * Prints the permission flags the program must start with, for the launchers in `bin/`:
 * `deno run $(deno run … cli/flags.ts ARGS) main.ts ARGS`. Reads only the environment and
 * the global flags in ARGS (for `--socket`), through the same table as everything else.
 *
 * @module
 */

import { splitGlobal } from "./args.ts";
import { contextFrom, unionFlags } from "./permissions.ts";

if (import.meta.main) {
  const env = (k: string) => Deno.env.get(k);
  let socket: string | undefined;
  try {
    socket = splitGlobal(Deno.args, env).global.socket;
  } catch {
    socket = undefined; // the program itself reports the usage error
  }
  const flags = unionFlags(contextFrom(env, {
    cwd: Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: new URL("..", import.meta.url).pathname.replace(/\/$/, ""),
    execPath: Deno.env.get("ISX_DENO") || Deno.execPath(),
    ...(socket ? { socket } : {}),
  }));
  Deno.stdout.writeSync(new TextEncoder().encode(flags.join("\n") + "\n"));
}
