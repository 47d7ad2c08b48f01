/**
 * Where the running program's own modules are: its sources, or the pre-built form of them
 * the launcher started instead (`scripts/prebuild.ts` writes it under `<root>/.prebuilt/`,
 * `bin/launcher.bash` runs it while no source is newer). The pre-built form is a code-split
 * bundle of main.ts and of every module the program imports by a computed specifier, laid
 * out as the sources are (`cli/rpc.js` for `cli/rpc.ts`), so one process loads a handful
 * of files instead of a few hundred modules; its entry (`cli/prebuilt_main.ts`) says so
 * here before the CLI runs. Modules that compute a specifier or a path from their own
 * location ask this module, since in a bundle `import.meta.url` is a chunk's.
 *
 * A leaf: imports nothing, so every layer may use it.
 *
 * @module
 */

/** The global the pre-built entry sets (`cli/prebuilt_main.ts`); `guest/mod.ts` reads it too. */
export const PREBUILT_KEY: unique symbol = Symbol.for("isx.prebuilt") as never;

/** What the pre-built entry records: file URLs of the program's root and of the bundle. */
export interface Prebuilt {
  /** The checkout's root, ending in `/` (main.ts, cli/, guest/ are under it). */
  root: string;
  /** The bundle's directory, ending in `/` (cli/prebuilt_main.js is under it). */
  out: string;
}

/** The pre-built program's locations, or undefined when running from the sources. */
export function prebuilt(): Prebuilt | undefined {
  return (globalThis as Record<symbol, Prebuilt | undefined>)[PREBUILT_KEY];
}

/**
 * The URL to import for the program's module at `path` (from the root, e.g.
 * `rpc/server/methods/mod.ts`): its pre-built form when the program runs pre-built, else
 * `source` (the module's URL computed from the caller's own).
 */
export function moduleUrl(path: string, source: string): string {
  const p = prebuilt();
  return p ? new URL(path.replace(/\.ts$/, ".js"), p.out).href : source;
}

/** The program's root directory (no trailing `/`), given the root computed from sources. */
export function programRoot(source: string): string {
  // undecoded, as cli/flags.ts computes it for the launcher: the two tables must agree
  return new URL(prebuilt()?.root ?? source).pathname.replace(/\/$/, "");
}
