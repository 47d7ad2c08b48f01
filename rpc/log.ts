/**
 * The one logger. Everything goes to stderr: stdout belongs to the protocol (rpc, mcp).
 * The level comes from `ISX_LOG` (error|warn|info|debug; default warn), read once by the CLI
 * and passed to {@link setLogLevel}, so library code never touches the environment.
 *
 * @module
 */

/** A log level name, most severe first. */
export type LogLevel = "error" | "warn" | "info" | "debug";

const LEVELS: Readonly<Record<LogLevel, number>> = { error: 0, warn: 1, info: 2, debug: 3 };

let current: LogLevel = "warn";
let sink: (line: string) => void = (line) => {
  // deno-lint-ignore no-console
  console.error(line);
};

/** Sets the threshold; messages above it are dropped. */
export function setLogLevel(level: LogLevel): void {
  current = level;
}

/** Sends log lines elsewhere (tests, the proxy's log file). */
export function setLogSink(fn: (line: string) => void): void {
  sink = fn;
}

/** True if `s` names a level. */
export function isLogLevel(s: string): s is LogLevel {
  return Object.hasOwn(LEVELS, s);
}

function emit(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (LEVELS[level] > LEVELS[current]) return;
  const extra = fields ? " " + JSON.stringify(fields) : "";
  sink(`${new Date().toISOString()} ${level} ${msg}${extra}`);
}

/** The logger. Never pass secrets: values are printed as given. */
export const log = {
  error: (msg: string, fields?: Record<string, unknown>) => emit("error", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit("warn", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit("info", msg, fields),
  debug: (msg: string, fields?: Record<string, unknown>) => emit("debug", msg, fields),
};
