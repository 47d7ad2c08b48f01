/**
 * Who a session is and whether it still runs. The id is `<pid>-<start>` (start: the epoch
 * millisecond the server began), unique across pid reuse. The spec reads liveness from
 * `/proc/<pid>/stat`; Deno grants `/proc` only with every permission, which `isx mcp` must
 * not have, so a session proves it is alive with a heartbeat instead: a file
 * `<state>/mcp/sessions/<id>` whose mtime it renews every {@link HEARTBEAT_MS}. A session
 * whose file is missing or older than {@link STALE_MS} is over (ended, or killed), so its
 * instances are orphans. Decision in docs/decisions.md.
 *
 * @module
 */

/** How often a live session renews its heartbeat. */
export const HEARTBEAT_MS = 2_000;

/** A heartbeat older than this means the session is gone. */
export const STALE_MS = 8_000;

const ID_RE = /^\d+-\d+$/;

/** A fresh id for this process. */
export function newSessionId(pid: number, startMs: number): string {
  return `${pid}-${startMs}`;
}

/** Whether a heartbeat of `mtimeMs` read at `nowMs` means alive (pure). */
export function heartbeatFresh(mtimeMs: number | undefined, nowMs: number): boolean {
  return mtimeMs !== undefined && nowMs - mtimeMs < STALE_MS;
}

/** The heartbeat files of one user's sessions. */
export class Heartbeats {
  #dir: string;
  #timer: ReturnType<typeof setInterval> | undefined;
  #own: string | undefined;

  /** Heartbeats under `dir` (`<state>/mcp/sessions`). */
  constructor(dir: string) {
    this.#dir = dir;
  }

  /** Starts beating for `id`; the file exists when this returns. */
  start(id: string): void {
    if (!ID_RE.test(id)) throw new TypeError(`invalid session id "${id}"`);
    Deno.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    this.#own = `${this.#dir}/${id}`;
    Deno.writeTextFileSync(this.#own, `${id}\n`, { mode: 0o600 });
    this.#timer = setInterval(() => {
      try {
        const now = new Date();
        Deno.utimeSync(this.#own!, now, now);
      } catch {
        /* recreated on the next beat if it was removed */
        try {
          Deno.writeTextFileSync(this.#own!, `${id}\n`, { mode: 0o600 });
        } catch { /* the state dir is gone: nothing to beat on */ }
      }
    }, HEARTBEAT_MS);
    Deno.unrefTimer(this.#timer);
  }

  /** Stops beating and removes the file: the session is over. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#own) {
      try {
        Deno.removeSync(this.#own);
      } catch { /* already gone */ }
    }
  }

  /** Whether session `id` is alive. */
  alive(id: string): boolean {
    if (!ID_RE.test(id)) return false;
    if (`${this.#dir}/${id}` === this.#own && this.#timer !== undefined) return true;
    try {
      return heartbeatFresh(Deno.statSync(`${this.#dir}/${id}`).mtime?.getTime(), Date.now());
    } catch {
      return false;
    }
  }
}
