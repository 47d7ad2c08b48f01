/**
 * `deno task compile`: builds `dist/isx` and `dist/isb` with `deno compile`, embedding the
 * guest runner scripts (`--include guest/`). `isx` records the union of the permission
 * table's grants (cli/permissions.ts) resolved for this host; `isb` runs only rpc, so it
 * records rpc's launch flags (cli/launch.ts): the union without, and denying, the paths rpc
 * never reads (`~/.ssh`, the isx configuration and state). `isx rpc` from `dist/isx` fails
 * closed instead (cli/permissions.ts `enterMode`).
 *
 * Deno downloads its runtime (`denort`) from its own host to compile; where that host is not
 * reachable, set `DENORT_BIN` to a runtime binary. Options: `--out DIR` (default `dist`),
 * `--print-flags` (print the flags of `isx`, or of `isb` with `--prog isb`, and exit).
 *
 * @module
 */

import { COMMANDS, LAZY_MODULES } from "../cli/commands.ts";
import { parseArgs } from "node:util";
import { launchFlags, launchMode } from "../cli/launch.ts";
import { contextFrom } from "../cli/permissions.ts";

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** The permission flags compile records for `prog`, for the calling user on this host. */
export function compileFlags(socket?: string, prog: "isx" | "isb" = "isx"): string[] {
  const ctx = contextFrom((k) => Deno.env.get(k), {
    cwd: Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: root,
    execPath: Deno.execPath(),
    ...(socket ? { socket } : {}),
  });
  return launchFlags(ctx, launchMode(prog, undefined));
}

async function compile(prog: "isx" | "isb", out: string): Promise<void> {
  const args = [
    "compile",
    "--quiet",
    ...compileFlags(undefined, prog),
    "--include",
    `${root}/guest`,
    // the command modules: imported by computed specifiers, so deno compile does not see them
    ...COMMANDS.flatMap((c) => ["--include", `${root}/cli/${c.module}`]),
    ...LAZY_MODULES.flatMap((m) => ["--include", `${root}/cli/${m}`]),
    // isb rpc's method table, which rpc/server/mod.ts imports by a computed specifier
    "--include",
    `${root}/rpc/server/methods/mod.ts`,
    "--output",
    `${out}/${prog}`,
    `${root}/main.ts`,
  ];
  const res = await new Deno.Command(Deno.execPath(), { args, cwd: root }).spawn().status;
  if (!res.success) Deno.exit(res.code || 1);
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      out: { type: "string", default: "dist" },
      "print-flags": { type: "boolean" },
      prog: { type: "string", default: "isx" },
    },
  });
  if (values["print-flags"]) {
    const prog = values.prog === "isb" ? "isb" : "isx";
    Deno.stdout.writeSync(
      new TextEncoder().encode(compileFlags(undefined, prog).join("\n") + "\n"),
    );
    Deno.exit(0);
  }
  const out = values.out!.startsWith("/") ? values.out! : `${root}/${values.out}`;
  await Deno.mkdir(out, { recursive: true });
  await compile("isx", out);
  await Deno.remove(`${out}/isb`).catch(() => {}); // a link to isx in older builds
  await compile("isb", out);
  Deno.stdout.writeSync(new TextEncoder().encode(`built ${out}/isx and ${out}/isb\n`));
}
