/**
 * Delivering this program into guests for its guest runner mode: one `deno bundle` of
 * `cli/bundle.ts` (main.ts with every command imported statically; a single JavaScript file,
 * npm dependencies inlined), the deno runtime it was started with, and `/usr/local/bin/isx`,
 * a launcher that starts the bundle with the permission flags the CLI computed for guests.
 * `deno compile` output cannot run on these hosts (shared/reference/deno-notes.md), so the
 * bundle is the deliverable.
 *
 * @module
 */

import { IsbError, VERSION } from "../../rpc/base.ts";
import { type HostTools, runHost } from "./cache.ts";

/** Where the program is in a guest. */
export const GUEST_PROGRAM = {
  bundle: "/usr/local/lib/isx/isx.js",
  deno: "/usr/local/bin/deno",
  launcher: "/usr/local/bin/isx",
} as const;

/** What delivering the program needs from the host. */
export interface ProgramSource {
  /** The deno binary running now (pushed into the guest as is). */
  execPath: string;
  /** This program's source directory (holds main.ts). */
  programDir: string;
  /** Permission flags the guest launcher passes (the CLI computes them). */
  flags: readonly string[];
}

function shQuote(s: string): string {
  return /^[A-Za-z0-9_./=:,@+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The launcher script text. */
export function launcherText(flags: readonly string[]): string {
  const f = flags.map(shQuote).join(" ");
  return `#!/bin/sh
# isx ${VERSION} for the guest runner mode; written by isx build.
export DENO_NO_UPDATE_CHECK=1
exec ${GUEST_PROGRAM.deno} run --no-config --no-lock --quiet ${f} ${GUEST_PROGRAM.bundle} "$@"
`;
}

/** Bundles main.ts into `<cacheDir>/program/isx-<version>.js`; returns its path. */
export async function bundleProgram(
  cacheDir: string,
  src: ProgramSource,
  tools: HostTools,
): Promise<string> {
  if (!/(^|\/)deno$/.test(src.execPath)) {
    throw new IsbError(
      "invalid",
      `deliver isx into the guest: the program runs on "${src.execPath}", not deno: run it with deno to build templates with the isx tool`,
    );
  }
  const dir = `${cacheDir}/program`;
  Deno.mkdirSync(dir, { recursive: true });
  const out = `${dir}/isx-${VERSION}.js`;
  tools.log(`bundling isx ${VERSION}`);
  await runHost(src.execPath, [
    "bundle",
    "--quiet",
    "--platform=deno",
    "--config",
    `${src.programDir}/deno.json`,
    "-o",
    out,
    `${src.programDir}/cli/bundle.ts`, // main.ts with every command imported statically
  ], { ...tools, env: { ...tools.env, NO_COLOR: "1" } });
  return out;
}
