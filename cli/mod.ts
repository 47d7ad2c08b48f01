/**
 * The composition root: argv → global flags → subcommand → permission mode → run.
 * The only place that turns errors into exit codes and stderr lines.
 *
 * One program answers to two names: `isb` (the SDK protocol, `isb rpc`) and `isx` (agents'
 * instances, the proxy, templates). The name comes from `ISX_PROG` (set by the launchers)
 * or the executable's file name.
 *
 * Start-up is paid per spawn (SDKs spawn `isb rpc` per client, agents `isx mcp` per
 * session), so this root imports only leaf modules (the error class, the log level, the
 * version) and the dispatch table; a command's module is imported when it runs.
 *
 * @module
 */

import { type IsbCode, IsbError } from "../rpc/errors.ts";
import { isLogLevel, setLogLevel } from "../rpc/log.ts";
import { programRoot } from "../rpc/prebuilt.ts";
import { VERSION } from "../rpc/version.ts";
import { splitGlobal, UsageError } from "./args.ts";
import type { Command, Prog } from "./command.ts";
import { type CommandEntry, COMMANDS, importModule } from "./commands.ts";
import { contextFrom, enterMode, PERMISSIONS } from "./permissions.ts";
import { followedDefaultRemote, readIfPermitted } from "./perm_context.ts";

export type { Prog };

/** Exit code for each error code: scripts can tell kinds of failure apart. */
export const EXIT_CODES: Record<IsbCode, number> = {
  connect: 6,
  request_timeout: 5,
  api: 1,
  not_found: 3,
  already_exists: 4,
  operation_timeout: 5,
  operation_failed: 1,
  not_ready: 7,
  exec_timeout: 5,
  invalid: 1,
  interpolation: 1,
  parse: 1,
  forbidden: 1,
  websocket: 1,
  protocol: 1,
  io: 1,
  json: 1,
  bad_request: 1,
};

/** Usage mistakes (unknown command or flag) exit with this. */
export const EXIT_USAGE = 2;

function progName(): Prog {
  let name = "";
  try {
    name = Deno.env.get("ISX_PROG") ?? "";
  } catch { /* no env access: fall through */ }
  if (!name) name = Deno.execPath().split("/").pop() ?? "";
  return name === "isb" ? "isb" : "isx";
}

/** The help text for a program name. */
export function mainHelp(prog: Prog): string {
  const cmds = COMMANDS.filter((c) => c.progs.includes(prog));
  const width = Math.max(8, ...cmds.map((c) => c.name.length));
  const lines = cmds.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  const what = prog === "isb"
    ? "declare, reconcile and drive Incus sandboxes"
    : "disposable Incus machines for AI coding agents";
  return [
    `${prog} ${VERSION}: ${what}`,
    "",
    `Usage: ${prog} [--socket PATH] [--project NAME] <command> [options]`,
    "",
    "Commands:",
    ...lines,
    "",
    "Global options (before or after the command):",
    "  --socket PATH          Incus unix socket (env INCUS_SOCKET, $INCUS_DIR/unix.socket,",
    "                         default /var/lib/incus/unix.socket)",
    "  --remote NAME|URL      an Incus remote of the incus client's config.yml, or",
    "                         https://HOST:PORT (env INCUS_REMOTE; docs/scale.md)",
    "  --target MEMBER        cluster member new instances are created on",
    "  --project NAME         Incus project (env INCUS_PROJECT)",
    "  --org ORG              shorthand for project isb-ORG (env ISB_ORG)",
    "  --create-timeout D     deadline of instance creation, e.g. 10m (default 10m)",
    "  -h, --help             this help; `<command> --help` for a command's",
    "  -V, --version          print the version",
    "",
    `Run \`${prog} <command> --help\` for details.`,
  ].join("\n");
}

function writeErr(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(line.endsWith("\n") ? line : line + "\n"));
}

function writeOut(text: string): void {
  Deno.stdout.writeSync(new TextEncoder().encode(text.endsWith("\n") ? text : text + "\n"));
}

function findCommand(prog: Prog, name: string): CommandEntry | undefined {
  return COMMANDS.find((c) => c.name === name && c.progs.includes(prog));
}

/** Runs the program for `argv`; returns the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const prog = progName();
  const envGet = (k: string) => Deno.env.get(k);
  let parsed;
  try {
    parsed = splitGlobal(argv, envGet);
  } catch (e) {
    writeErr(`${prog}: ${(e as Error).message} (see ${prog} --help)`);
    return EXIT_USAGE;
  }
  const { command, rest } = parsed;
  // no remote named: the incus client's default-remote, when it names one and config.yml is
  // readable under the flags the launcher gave (cli/perm_context.ts; docs/decisions.md)
  const followed = parsed.global.remote === undefined
    ? followedDefaultRemote(envGet, {
      socketFlag: parsed.global.socketFlag === true,
      read: readIfPermitted,
    })
    : undefined;
  const global = followed ? { ...parsed.global, remote: followed } : parsed.global;
  const level = Deno.env.get("ISX_LOG");
  if (level && isLogLevel(level)) setLogLevel(level);
  const perm = contextFrom(envGet, {
    cwd: Deno.cwd(),
    uid: Deno.uid() ?? 0,
    programDir: programRoot(new URL("..", import.meta.url).href),
    execPath: Deno.execPath(),
    socket: global.socket,
    remote: global.remote !== undefined,
  });

  const entry = command === undefined ? undefined : findCommand(prog, command);
  // the command's module, loaded only when it runs or prints its own help
  const cmd: Command | undefined = entry && (!global.version || global.help)
    ? await entry.load()
    : undefined;
  if (!cmd || global.help || global.version) {
    enterMode("info", perm);
    if (global.version && !cmd) {
      writeOut(`${prog} ${VERSION}`);
      return 0;
    }
    if (cmd && global.help) {
      writeOut(cmd.help);
      return 0;
    }
    if (command === undefined || command === "help") {
      writeOut(mainHelp(prog));
      return command === undefined && !global.help ? EXIT_USAGE : 0;
    }
    if (!cmd) {
      writeErr(`${prog}: unknown command "${command}" (see ${prog} --help)`);
      return EXIT_USAGE;
    }
  }
  const found = cmd!;
  try {
    const mode = found.mode(rest);
    const names = PERMISSIONS[mode](perm).env;
    const env: Record<string, string> = {};
    if (names === true) Object.assign(env, Deno.env.toObject());
    else for (const k of names) env[k] = Deno.env.get(k) ?? "";
    // a remote's files are read now: the mode entered next keeps no read of them
    const place = global.remote !== undefined || global.target
      ? await importModule<typeof import("./incus_remote.ts")>("incus_remote.ts")
      : undefined;
    const incus = place?.resolvePlace(global, perm.incusConf);
    enterMode(mode, perm);
    if (place && incus && mode !== "info" && mode !== "guest") {
      await place.preflightPlace(incus, global);
    }
    // the remote's own default project (config.yml `project:`), as incus does, unless named
    const g = incus?.project && global.project === undefined
      ? { ...global, project: incus.project }
      : global;
    return await found.run(rest, { prog, global: g, perm, env, ...(incus ? { incus } : {}) });
  } catch (e) {
    if (e instanceof UsageError) {
      writeErr(`${prog} ${found.name}: ${e.message} (see ${prog} ${found.name} --help)`);
      return EXIT_USAGE;
    }
    if (e instanceof IsbError) {
      writeErr(`${prog}: ${e.message}`);
      return EXIT_CODES[e.code];
    }
    if (e instanceof Deno.errors.NotCapable) {
      writeErr(`${prog}: not permitted in ${found.name}: ${e.message}`);
      return 1;
    }
    throw e;
  }
}
