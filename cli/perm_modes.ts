/**
 * The vocabulary of the permission table (cli/permissions.ts, which re-exports all of it and
 * stays the one table): what a mode may do ({@link Grants}), the modes, and the pure helpers
 * that render and compare grants. Apart from the table so that it holds the table itself.
 *
 * @module
 */

/** What one mode may do. Paths are absolute once resolved. */
export interface Grants {
  read: string[];
  write: string[];
  /** `true` = any host; a list = those hosts only; empty = none. */
  net: true | string[];
  /** `true` = every variable; a list = those read once before the mode starts, then none. */
  env: true | string[];
  run: string[];
  sys: string[];
  /**
   * Read denials (`--deny-read`): paths the mode must never read even where a grant covers
   * them (rpc's working directory may be `$HOME`). Deno cannot add a denial at run time.
   */
  denyRead?: string[];
}

/** Every mode the program runs in. Human commands are grouped by what they touch. */
export const MODES = [
  "rpc",
  "proxy",
  "proxy-ctl",
  "guest",
  "init",
  "build",
  "instances",
  "info",
  "mcp",
  "pool",
] as const;
/** A mode name. */
export type Mode = typeof MODES[number];

/** The guest side's fixed paths: the runner's state lives here inside an instance. */
export const GUEST_PATHS = { run: "/run/isx", tasks: "/var/lib/isx/tasks" } as const;

/** Sorted, without duplicates. */
export function uniq(xs: string[]): string[] {
  return [...new Set(xs)].sort();
}

/** Grants as `deno run`/`deno compile` flags, always with `--no-prompt`. */
export function grantFlags(g: Grants): string[] {
  const flags = ["--no-prompt"];
  const list = (name: string, xs: true | string[]) => {
    if (xs === true) flags.push(`--allow-${name}`);
    else if (xs.length) flags.push(`--allow-${name}=${xs.join(",")}`);
  };
  list("read", g.read);
  list("write", g.write);
  list("net", g.net);
  list("env", g.env);
  list("run", g.run);
  list("sys", g.sys);
  return flags;
}

/** True when `parent` is `child` or a directory above it. */
export function covers(parent: string, child: string): boolean {
  return child === parent || child.startsWith(parent.endsWith("/") ? parent : parent + "/");
}
