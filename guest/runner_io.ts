/**
 * The task-directory I/O every agent runner shares (spec §3.2, §3.6, §6.B): the files of run
 * n, the prompt read from `prompt-<n>.md` (or stdin), an append-only events log, the
 * `session_id` file, the `exit-<n>` file written aside then renamed, and cancel semantics.
 * Runs in the guest; imports nothing, so a runner and this file are pushed as they are.
 *
 * Two guest facts shape it. The guest's root is the agent's (passwordless sudo), so any
 * file a runner reads may have been replaced by a FIFO, which would block a plain open
 * forever: reads open read-write (never blocks on Linux) and refuse anything but a regular
 * file. And the host may read at any instant: whatever it waits on (`exit-<n>`,
 * `session_id`) appears whole, through a temp file in the same directory and a rename.
 *
 * Cancel (guest/task_shell.ts CANCEL_SH): the host writes `cancelling-<n>`, stops the unit
 * (TERM to the whole cgroup, KILL after 2 s), sweeps processes carrying `ISX_MCP_TASK`, and
 * records 143 if no exit file exists by then. A runner therefore passes TERM/INT on to its
 * agent ({@link onCancel}) and, when it can still write, records 128+signal itself; the
 * first exit written wins ({@link writeExit} never replaces one).
 *
 * @module
 */

/** The paths of one run's files inside a task directory. */
export interface RunFiles {
  /** The task directory. */
  dir: string;
  /** The run number. */
  run: number;
  /** `prompt-<n>.md`: the instruction, written by the launch from its stdin. */
  prompt: string;
  /** `events-<n>.jsonl`: one event per line, appended. */
  events: string;
  /** `stderr-<n>.log`: the agent's stderr. */
  stderr: string;
  /** `exit-<n>`: the run's exit code, the last file a run writes. */
  exit: string;
  /** `cancelling-<n>`: epoch seconds, while a cancel is under way. */
  cancelling: string;
  /** `session_id`: the agent's session, for resuming in later runs. */
  session: string;
}

/** The files of run `run` in `dir`. */
export function runFiles(dir: string, run: number): RunFiles {
  if (!dir.startsWith("/") || !Number.isInteger(run) || run < 1) {
    throw new TypeError(`run files: need an absolute directory and a run ≥ 1 (got ${dir}, ${run})`);
  }
  return {
    dir,
    run,
    prompt: `${dir}/prompt-${run}.md`,
    events: `${dir}/events-${run}.jsonl`,
    stderr: `${dir}/stderr-${run}.log`,
    exit: `${dir}/exit-${run}`,
    cancelling: `${dir}/cancelling-${run}`,
    session: `${dir}/session_id`,
  };
}

/** The most a read takes by default (the prompt limit of a tool call is 1 MiB). */
export const READ_LIMIT = 4 * 1024 * 1024;

/**
 * Reads a regular file's text (at most `limit` bytes); undefined when it does not exist.
 * Opened read-write so a FIFO cannot block; anything but a regular file is a TypeError.
 */
export async function readRegular(path: string, limit = READ_LIMIT): Promise<string | undefined> {
  let f: Deno.FsFile;
  try {
    f = await Deno.open(path, { read: true, write: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
  try {
    if (!(await f.stat()).isFile) throw new TypeError(`${path}: not a regular file`);
    const buf = new Uint8Array(limit);
    let n = 0;
    while (n < limit) {
      const got = await f.read(buf.subarray(n));
      if (got === null) break;
      n += got;
    }
    return new TextDecoder().decode(buf.subarray(0, n));
  } finally {
    f.close();
  }
}

/** Writes `text` beside `path` and renames it over `path`: readers never see it partial. */
export async function writeAside(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  try {
    await Deno.writeTextFile(tmp, text, { createNew: true, mode: 0o644 });
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}

/**
 * Records the run's exit code unless one is already there (a cancel's 143, or an earlier
 * write); true when this call wrote it. The file appears whole, never empty.
 */
export async function writeExit(files: RunFiles, code: number): Promise<boolean> {
  if (!Number.isInteger(code) || code < 0 || code > 255) {
    throw new TypeError(`exit code ${code}: must be 0-255`);
  }
  const tmp = `${files.exit}.tmp-${crypto.randomUUID().slice(0, 8)}`;
  await Deno.writeTextFile(tmp, `${code}\n`, { createNew: true, mode: 0o644 });
  try {
    await Deno.link(tmp, files.exit); // fails if an exit exists: the first one wins
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.AlreadyExists) return false;
    throw e;
  } finally {
    await Deno.remove(tmp).catch(() => {});
  }
}

/** Records the session id (checked: letters, digits, `._:@-`) once; later calls keep it. */
export async function writeSessionOnce(files: RunFiles, id: string): Promise<boolean> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$/.test(id)) {
    throw new TypeError(`session id "${id.slice(0, 80)}": unexpected characters`);
  }
  if ((await readRegular(files.session, 256))?.trim()) return false;
  await writeAside(files.session, `${id}\n`);
  return true;
}

/** The run's events log: JSON lines appended whole, one write per batch. */
export class EventLog {
  #file: Deno.FsFile;
  #enc = new TextEncoder();

  private constructor(file: Deno.FsFile) {
    this.#file = file;
  }

  /** Opens (creating) `path` for appending; refuses anything but a regular file. */
  static async open(path: string): Promise<EventLog> {
    const f = await Deno.open(path, { append: true, create: true });
    if (!(await f.stat()).isFile) {
      f.close();
      throw new TypeError(`${path}: not a regular file`);
    }
    return new EventLog(f);
  }

  /** Appends events, one JSON line each, in a single write. */
  async append(events: readonly object[]): Promise<void> {
    if (events.length === 0) return;
    const bytes = this.#enc.encode(events.map((e) => JSON.stringify(e) + "\n").join(""));
    let off = 0;
    while (off < bytes.length) off += await this.#file.write(bytes.subarray(off));
  }

  /** Closes the log. */
  close(): void {
    this.#file.close();
  }
}

/** The signals a cancel or a stop sends a run. */
export const CANCEL_SIGNALS: readonly Deno.Signal[] = ["SIGTERM", "SIGINT", "SIGHUP"];

const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

/** The shell's exit code for a run ended by `signal` (128 + its number; TERM → 143). */
export function signalExit(signal: Deno.Signal): number {
  return 128 + (SIGNAL_NUMBERS[signal] ?? 15);
}

/**
 * Calls `handler` once on the first cancel signal (TERM, INT or HUP), for a runner to pass
 * it on to its agent; returns the function that removes the listeners.
 */
export function onCancel(handler: (signal: Deno.Signal) => void): () => void {
  let fired = false;
  const listeners = CANCEL_SIGNALS.map((sig) => {
    const l = () => {
      if (fired) return;
      fired = true;
      handler(sig);
    };
    Deno.addSignalListener(sig, l);
    return [sig, l] as const;
  });
  return () => {
    for (const [sig, l] of listeners) Deno.removeSignalListener(sig, l);
  };
}

/** True while a cancel of this run is under way (its stamp exists and holds digits). */
export async function cancelling(files: RunFiles): Promise<boolean> {
  const v = await readRegular(files.cancelling, 32).catch(() => undefined);
  return v !== undefined && /^\d{1,12}\n?$/.test(v);
}
