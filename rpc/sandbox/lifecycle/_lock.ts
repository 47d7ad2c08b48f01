/**
 * The per-sandbox lock (isb-rpc.md §9.3), so two concurrent create/ensure/start calls on one
 * name never both act.
 *
 * It is an exclusive `flock(2)` on `<lockDir>/<project>/<name>.lock`, the same path and the
 * same lock kind the original isb CLI takes, so a Deno server and a running `isb` exclude
 * each other. `Deno.FsFile.tryLock(true)` is exactly `flock(fd, LOCK_EX|LOCK_NB)` (checked
 * with strace on Deno 2.9.6, and against util-linux `flock(1)` in both directions), so the
 * wait is a poll every 100 ms on the injected clock: never a blocking `lock()`, which would
 * park a thread of Deno's pool and could not honour the deadline. Deno opens files with
 * `O_CLOEXEC`, so the descriptor never leaks into a child. The lock is released by
 * {@link NameLock.release} (closing the file); the file itself stays, as isb's does.
 *
 * @module
 */

import { IsbError } from "../../errors.ts";
import { formatDuration } from "../../duration.ts";

import { type Clock, SYSTEM_CLOCK } from "../../clock.ts";
export { type Clock, SYSTEM_CLOCK };

/** How long a caller waits for another holder by default (15 min). */
export const LOCK_WAIT_MS = 15 * 60_000;

/** How often a busy lock is tried again. */
export const LOCK_POLL_MS = 100;

/** Options of {@link acquireLock}. */
export interface LockOptions {
  /** The lock root, `$XDG_RUNTIME_DIR/isb` or `<tmp>/isb-<uid>/isb`. */
  lockDir: string;
  /** Incus project ("" means `default`). */
  project: string;
  /** Sandbox (instance) name. */
  name: string;
  /** How long to wait for another holder; {@link LOCK_WAIT_MS} when absent. */
  waitMs?: number;
  clock?: Clock;
  /** Called once, when the lock is busy, with its path. */
  onWait?: (path: string) => void;
}

/** A held lock. */
export class NameLock {
  #file: Deno.FsFile | undefined;
  /** The lock file. */
  readonly path: string;

  constructor(file: Deno.FsFile, path: string) {
    this.#file = file;
    this.path = path;
  }

  /** Releases the lock (idempotent). */
  release(): void {
    const f = this.#file;
    this.#file = undefined;
    f?.close();
  }

  /** `using` support. */
  [Symbol.dispose](): void {
    this.release();
  }
}

/** The lock file's path for a sandbox. */
export function lockPath(lockDir: string, opts: { project: string; name: string }): string {
  const project = opts.project === "" ? "default" : opts.project;
  return `${lockDir}/${project}/${opts.name}.lock`;
}

/** Takes the sandbox's lock, polling every 100 ms until `waitMs`; a timeout is `invalid`. */
export async function acquireLock(opts: LockOptions): Promise<NameLock> {
  const clock = opts.clock ?? SYSTEM_CLOCK;
  const waitMs = opts.waitMs ?? LOCK_WAIT_MS;
  const path = lockPath(opts.lockDir, opts);
  await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true, mode: 0o700 });
  const file = await Deno.open(path, { create: true, write: true, truncate: false });
  const started = clock.now();
  let told = false;
  try {
    while (true) {
      if (await file.tryLock(true)) return new NameLock(file, path);
      if (!told) {
        told = true;
        opts.onWait?.(path);
      }
      if (clock.now() - started >= waitMs) {
        throw new IsbError(
          "invalid",
          `timed out after ${
            formatDuration(waitMs)
          } waiting for the lock on ${opts.name} (${path}) held by another isb`,
        );
      }
      await clock.sleep(LOCK_POLL_MS);
    }
  } catch (e) {
    file.close();
    throw e;
  }
}

/** Runs `fn` while holding the sandbox's lock. */
export async function withLock<T>(opts: LockOptions, fn: () => Promise<T>): Promise<T> {
  const lock = await acquireLock(opts);
  try {
    return await fn();
  } finally {
    lock.release();
  }
}
