/**
 * Runs one command inside an instance as a recorded task: the runner behind background
 * commands and, later, delegated agents. Self-contained (imports nothing) because it runs in
 * the guest under the `guest` permission mode: it may spawn the allowed programs and write its
 * task directory, and cannot open a network connection.
 *
 * A task directory `<tasks>/<id>/` holds `state.json` (rewritten atomically at each change),
 * `events.jsonl` (one event per line, appended), `stdout.log` and `stderr.log`. The host
 * reads them back with guest/protocol.ts: the guest's files are the source of truth.
 *
 * @module
 */

/** What to run. */
export interface TaskSpec {
  /** The task id (1-64 of A-Za-z0-9._:-), naming its directory under `root`. */
  id: string;
  /** The command to spawn, program first; never run through a shell. */
  argv: string[];
  /** The tasks root (default /var/lib/isx/tasks). */
  root: string;
  /** The command's working directory (default: the runner's). */
  cwd?: string;
  /** Variables added to the runner's environment for the command. */
  env?: Record<string, string>;
}

const ID_RE = /^[A-Za-z0-9._:-]{1,64}$/;

async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.tmp`;
  await Deno.writeTextFile(tmp, JSON.stringify(value) + "\n");
  await Deno.rename(tmp, path);
}

/** Runs the task to completion; resolves to the command's exit code. */
export async function runTask(spec: TaskSpec): Promise<number> {
  if (!ID_RE.test(spec.id)) {
    throw new TypeError(`invalid task id "${spec.id}": use 1-64 of A-Za-z0-9._:-`);
  }
  if (spec.argv.length === 0) throw new TypeError("task needs a command");
  const dir = `${spec.root}/${spec.id}`;
  await Deno.mkdir(dir, { recursive: true, mode: 0o750 });
  const events = await Deno.open(`${dir}/events.jsonl`, { append: true, create: true });
  const enc = new TextEncoder();
  const event = (e: Record<string, unknown>) =>
    events.write(enc.encode(JSON.stringify({ at: new Date().toISOString(), ...e }) + "\n"));
  const state: Record<string, unknown> = {
    id: spec.id,
    argv: spec.argv,
    state: "running",
    started_at: new Date().toISOString(),
  };
  const stdout = await Deno.open(`${dir}/stdout.log`, {
    write: true,
    create: true,
    truncate: true,
  });
  const stderr = await Deno.open(`${dir}/stderr.log`, {
    write: true,
    create: true,
    truncate: true,
  });
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(spec.argv[0]!, {
      args: spec.argv.slice(1),
      ...(spec.cwd ? { cwd: spec.cwd } : {}),
      ...(spec.env ? { env: spec.env } : {}),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    await event({ type: "error", message });
    await writeJsonAtomic(`${dir}/state.json`, {
      ...state,
      state: "finished",
      exit_code: 127,
      error: message,
      finished_at: new Date().toISOString(),
    });
    stdout.close();
    stderr.close();
    events.close();
    return 127;
  }
  state.pid = child.pid;
  await writeJsonAtomic(`${dir}/state.json`, state);
  await event({ type: "start", pid: child.pid });
  const forward = (sig: Deno.Signal) => () => {
    void event({ type: "signal", signal: sig });
    try {
      child.kill(sig);
    } catch { /* already gone */ }
  };
  const onTerm = forward("SIGTERM");
  const onInt = forward("SIGINT");
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onInt);
  const [status] = await Promise.all([
    child.status,
    child.stdout.pipeTo(stdout.writable),
    child.stderr.pipeTo(stderr.writable),
  ]);
  Deno.removeSignalListener("SIGTERM", onTerm);
  Deno.removeSignalListener("SIGINT", onInt);
  const code = status.signal ? 128 + signalNumber(status.signal) : status.code;
  await event({
    type: "exit",
    exit_code: code,
    ...(status.signal ? { signal: status.signal } : {}),
  });
  await writeJsonAtomic(`${dir}/state.json`, {
    ...state,
    state: "finished",
    exit_code: code,
    finished_at: new Date().toISOString(),
  });
  events.close();
  return code;
}

function signalNumber(sig: string): number {
  const table: Record<string, number> = {
    SIGHUP: 1,
    SIGINT: 2,
    SIGQUIT: 3,
    SIGKILL: 9,
    SIGTERM: 15,
  };
  return table[sig] ?? 0;
}
