/**
 * The keeper lock: an exclusive `flock` on `<state>/pool/keeper.lock`, held for as long as
 * the keeper process lives; the kernel drops it the moment the process dies, however it
 * dies. So two keepers never run at once, a killed keeper's lock is free at once, and
 * whoever takes it knows every member still `filling` was left by a dead keeper.
 *
 * @module
 */

/** A held keeper lock. */
export interface KeeperLock {
  /** Releases it. */
  release(): void;
}

/** Takes the lock, or returns the pid the file names when another process holds it. */
export function takeKeeperLock(dir: string): KeeperLock | { heldBy: string } {
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = `${dir}/keeper.lock`;
  const file = Deno.openSync(path, { read: true, write: true, create: true, mode: 0o600 });
  if (!file.tryLockSync(true)) {
    file.close();
    let pid = "";
    try {
      pid = Deno.readTextFileSync(path).trim();
    } catch { /* unreadable: unnamed */ }
    return { heldBy: pid || "another process" };
  }
  file.truncateSync(0);
  file.writeSync(new TextEncoder().encode(`${Deno.pid}\n`));
  return {
    release() {
      try {
        file.unlockSync();
      } finally {
        file.close();
      }
    },
  };
}

/** True when a keeper holds the lock now (a shared lock is refused). */
export function keeperRunning(dir: string): boolean {
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(`${dir}/keeper.lock`, { read: true });
  } catch {
    return false;
  }
  try {
    const got = file.tryLockSync(false);
    if (got) file.unlockSync();
    return !got;
  } finally {
    file.close();
  }
}
