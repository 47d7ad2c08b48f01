/**
 * `deno task compile`: builds `dist/isx` (and `dist/isb`, a link to it) with `deno compile`,
 * recording the union of the permission table's grants (cli/permissions.ts) resolved for
 * this host, and embedding the guest runner scripts (`--include guest/`).
 *
 * Deno downloads its runtime (`denort`) from its own host to compile; where that host is not
 * reachable, set `DENORT_BIN` to a runtime binary. Options: `--out DIR` (default `dist`),
 * `--print-flags` (print the permission flags and exit).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { contextFrom, unionFlags } from "../cli/permissions.ts";

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

/** The permission flags compile records, for the calling user on this host. */
export function compileFlags(socket?: string): string[] {
  return unionFlags(contextFrom((k) => Deno.env.get(k), {
    cwd: Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: root,
    execPath: Deno.execPath(),
    ...(socket ? { socket } : {}),
  }));
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: { out: { type: "string", default: "dist" }, "print-flags": { type: "boolean" } },
  });
  const flags = compileFlags();
  if (values["print-flags"]) {
    Deno.stdout.writeSync(new TextEncoder().encode(flags.join("\n") + "\n"));
    Deno.exit(0);
  }
  const out = values.out!.startsWith("/") ? values.out! : `${root}/${values.out}`;
  await Deno.mkdir(out, { recursive: true });
  const args = [
    "compile",
    "--quiet",
    ...flags,
    "--include",
    `${root}/guest`,
    "--output",
    `${out}/isx`,
    `${root}/main.ts`,
  ];
  const res = await new Deno.Command(Deno.execPath(), { args, cwd: root }).spawn().status;
  if (!res.success) Deno.exit(res.code || 1);
  try {
    await Deno.remove(`${out}/isb`);
  } catch { /* not there yet */ }
  await Deno.symlink("isx", `${out}/isb`);
  Deno.stdout.writeSync(new TextEncoder().encode(`built ${out}/isx (and ${out}/isb)\n`));
}
