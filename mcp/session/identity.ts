/**
 * Who a session is: `<pid>-<starttime>` (shared/spec/isx-mcp.md §4.1), where starttime is
 * the kernel's start tick of the process (`/proc/<pid>/stat` field 22), so a reused pid
 * never passes for a dead session. A session is alive when that pid exists with that start.
 *
 * @module
 */

/** The start tick of `pid`, or undefined when no such process exists. */
export function startTicks(pid: number): string | undefined {
  let text: string;
  try {
    text = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch {
    return undefined;
  }
  return parseStartTicks(text);
}

/** Field 22 of a `/proc/<pid>/stat` line (pure); the command name may hold spaces and ")". */
export function parseStartTicks(stat: string): string | undefined {
  const close = stat.lastIndexOf(")");
  if (close < 0) return undefined;
  const rest = stat.slice(close + 2).split(" ");
  // rest[0] is field 3 (state), so field 22 is rest[19]
  const v = rest[19];
  return v && /^\d+$/.test(v) ? v : undefined;
}

/** This process's session id. */
export function ownSessionId(pid: number = Deno.pid): string {
  return `${pid}-${startTicks(pid) ?? "0"}`;
}

/** Whether the session `id` is still running (same pid, same start). */
export function sessionAlive(id: string): boolean {
  const m = /^(\d+)-(\d+)$/.exec(id);
  if (!m) return false;
  return startTicks(Number(m[1])) === m[2];
}
