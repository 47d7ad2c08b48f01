/**
 * Who a session is and whether it still runs. The id is `<pid>-<start>` (start: the epoch
 * millisecond the server began), unique across pid reuse. The spec reads liveness from
 * `/proc/<pid>/stat`; Deno refuses every `/proc` read without `--allow-all` (any
 * `--allow-read` grant, checked on 2.9.6), which `isx mcp` must not have. So a live session
 * holds an exclusive `flock` on its file `<state>/mcp/sessions/<id>` for as long as its
 * process lives, and the kernel drops that lock the moment the process dies, however it dies.
 * Another session asks with a non-blocking shared lock: refused means alive; granted means
 * the holder is gone (killed: the file is left, and removed by whoever finds it so); no file
 * means it ended cleanly. Exact, and nothing to renew. Decision in docs/decisions.md.
 *
 * @module
 */

// a host process's `<pid>-<start>`, or a coordinator's `instance:<name>:<grant>` (its one
// `isx mcp --caller-instance` child holds the lock while it runs; mcp/instances/caller_grant.ts)
const ID_RE = /^(?:\d+-\d+|instance:[A-Za-z0-9][A-Za-z0-9.-]{0,62}:[0-9a-f]{32})$/;

/** The `mcp-owner` stamp: the host user and the state directory whose sessions are its. */
export function mcpOwner(uid: number, stateDir: string): string {
  return `${uid}:${stateDir}`;
}

/** A fresh id for this process. */
export function newSessionId(pid: number, startMs: number): string {
  return `${pid}-${startMs}`;
}

/** The liveness locks of one user's sessions. */
export class SessionLocks {
  #dir: string;
  #file: Deno.FsFile | undefined;
  #own: string | undefined;

  /** Locks under `dir` (`<state>/mcp/sessions`). */
  constructor(dir: string) {
    this.#dir = dir;
  }

  /**
   * Takes this process's lock for `id`; the file exists, locked, when this returns. It is
   * locked under a temporary name and then renamed, so no one ever sees it unlocked.
   */
  start(id: string): void {
    if (!ID_RE.test(id)) throw new TypeError(`invalid session id "${id}"`);
    Deno.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.#dir}/.${id}.new`;
    const file = Deno.openSync(tmp, { read: true, write: true, create: true, mode: 0o600 });
    try {
      if (!file.tryLockSync(true)) throw new Error(`session file ${tmp} is locked by another`);
      file.writeSync(new TextEncoder().encode(`${id}\n`));
      Deno.renameSync(tmp, `${this.#dir}/${id}`);
    } catch (e) {
      file.close();
      throw e;
    }
    this.#file = file;
    this.#own = id;
    this.#removeDead();
  }

  /** Ends this session: removes its file, then drops the lock. */
  stop(): void {
    if (!this.#file) return;
    try {
      Deno.removeSync(`${this.#dir}/${this.#own}`);
    } catch { /* already gone */ }
    this.#file.close();
    this.#file = undefined;
  }

  /**
   * Whether session `id` is alive: its file exists and is locked. A file that cannot be
   * opened or locked for another reason counts as alive, so nothing is taken on a guess.
   */
  alive(id: string): boolean {
    if (!ID_RE.test(id)) return false;
    if (id === this.#own && this.#file) return true;
    const path = `${this.#dir}/${id}`;
    let f: Deno.FsFile;
    try {
      f = Deno.openSync(path, { read: true });
    } catch (e) {
      return !(e instanceof Deno.errors.NotFound);
    }
    try {
      if (!f.tryLockSync(false)) return true;
      // the holder is dead (killed): its file goes, so later checks stop at "no file"
      try {
        Deno.removeSync(path);
      } catch { /* another checker removed it */ }
      return false;
    } catch {
      return true;
    } finally {
      f.close();
    }
  }

  /** Removes the files of sessions that were killed (cheap: one lock try per file). */
  #removeDead(): void {
    try {
      for (const e of Deno.readDirSync(this.#dir)) {
        if (e.isFile && ID_RE.test(e.name)) this.alive(e.name);
      }
    } catch { /* unreadable: left for the checks to find */ }
  }
}
