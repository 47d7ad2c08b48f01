/**
 * Global flags, shared by `isb` and `isx`, which may stand before or after the subcommand
 * (clap's "global" args in the original isb), with their environment fallbacks
 * (shared/spec/isb-rpc.md §1). Everything else is left for the subcommand to parse strictly
 * with `parseArgv` (`node:util` parseArgs's behaviour, without loading `node:util`).
 *
 * @module
 */

import { type OptionSpec, parseArgv } from "./argv.ts";
import { defaultSocket } from "./permissions.ts";

/** The global flags after env fallbacks. */
export interface GlobalFlags {
  socket: string;
  /** True when `--socket` was given (a choice of the local daemon: no default-remote). */
  socketFlag?: boolean;
  /** Incus project; `undefined` = the default project. */
  project: string | undefined;
  /** Incus remote (`--remote`, env INCUS_REMOTE): a name in the incus client's config.yml or an https:// URL; `undefined` = the socket. */
  remote: string | undefined;
  /** Cluster member new instances are placed on (`--target`); `undefined` = incusd chooses. */
  target: string | undefined;
  createTimeout: string | undefined;
  quiet: boolean;
  help: boolean;
  version: boolean;
}

/** A usage mistake: the CLI prints one line and exits 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

const VALUE_FLAGS: Record<string, string> = {
  "--socket": "socket",
  "--project": "project",
  "--remote": "remote",
  "--target": "target",
  "--org": "org",
  "--create-timeout": "create-timeout",
  "--env-file": "env-file",
  "-f": "file",
  "--file": "file",
  "-P": "profile",
};
const BOOL_FLAGS: Record<string, string> = {
  "-q": "quiet",
  "--quiet": "quiet",
  "-h": "help",
  "--help": "help",
  "-V": "version",
  "--version": "version",
};

/** Splits argv into global flags, the subcommand and the subcommand's own arguments. */
export function splitGlobal(argv: string[], env: (k: string) => string | undefined): {
  global: GlobalFlags;
  command: string | undefined;
  rest: string[];
} {
  const raw: Record<string, string | boolean> = {};
  let command: string | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (tok === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const eq = tok.startsWith("--") ? tok.indexOf("=") : -1;
    const name = eq > 0 ? tok.slice(0, eq) : tok;
    const key = VALUE_FLAGS[name];
    if (key) {
      // -f names compose files for other isb subcommands; only before the subcommand.
      if (name === "-f" && command !== undefined) {
        rest.push(tok);
        continue;
      }
      const value = eq > 0 ? tok.slice(eq + 1) : argv[++i];
      if (value === undefined) throw new UsageError(`option ${name} needs a value`);
      raw[key] = value;
      continue;
    }
    const bool = BOOL_FLAGS[tok];
    if (bool) {
      raw[bool] = true;
      continue;
    }
    if (command === undefined && !tok.startsWith("-")) command = tok;
    else rest.push(tok);
  }
  const get = (k: string) => {
    const v = env(k);
    return v === undefined || v === "" ? undefined : v;
  };
  const str = (k: string) => (typeof raw[k] === "string" ? raw[k] as string : undefined);
  const org = str("org") ?? get("ISB_ORG");
  let project = str("project") ?? get("INCUS_PROJECT") ?? (org ? `isb-${org}` : undefined);
  if (project === "" || project === "default") project = undefined;
  return {
    global: {
      socket: str("socket") ?? defaultSocket(get),
      socketFlag: str("socket") !== undefined,
      project,
      remote: str("remote") ?? get("INCUS_REMOTE"),
      target: str("target") || undefined,
      createTimeout: str("create-timeout"),
      quiet: raw.quiet === true,
      help: raw.help === true,
      version: raw.version === true,
    },
    command,
    rest,
  };
}

/** Strict parse of a subcommand's own flags; unknown flags become a {@link UsageError}. */
export function parseCommandArgs<const O extends Record<string, OptionSpec>>(
  args: string[],
  options: O,
  positionals = true,
) {
  try {
    return parseArgv(args, options, positionals);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message.replace(/\.$/, "") : String(e));
  }
}
