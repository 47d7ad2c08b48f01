/**
 * Running things in a guest from the host, through the Incus client only: a command with
 * recorded output, a script whose output is followed as it is written, a user lookup.
 * Waiting on instances is in `waits.ts`.
 *
 * Non-interactive commands use Incus's recorded output (`record-output`) rather than exec
 * websockets: one POST and one wait, no long-lived sockets, nothing to lose when a busy
 * incusd is slow to answer an upgrade. Only `isx shell` needs the websockets.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { waitLong } from "./waits.ts";

/** Request deadline for the isx commands' Incus client: a busy incusd was seen answering
 * plain GETs after 30-98 s on the build machines, which the default 30 s turns into errors. */
export const SLOW_DAEMON_MS = 120_000;

/** The PATH guests' commands get. */
export const GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Who runs a guest command. */
export interface GuestUser {
  /** Numeric user id. */
  uid: number;
  /** Numeric group id. */
  gid: number;
  /** Home directory. */
  home: string;
  /** The name. */
  name: string;
}

/** root. */
export const ROOT: GuestUser = { uid: 0, gid: 0, home: "/root", name: "root" };

/** Options of {@link runScript}. */
export interface ScriptOptions {
  /** Who runs it (default root). */
  user?: GuestUser;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Working directory. */
  cwd?: string;
  /** Positional arguments of the script ($1…), passed as argv, never spliced into it. */
  args?: string[];
  /** Receives each output line (stdout and stderr interleaved as written). */
  onLine?: (line: string) => void;
}

function baseEnv(user: GuestUser): Record<string, string> {
  return {
    PATH: GUEST_PATH,
    HOME: user.home,
    USER: user.name,
    LOGNAME: user.name,
    LANG: "C.UTF-8",
    DEBIAN_FRONTEND: "noninteractive",
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The outcome of a recorded exec. */
export interface Recorded {
  /** The exit code. */
  exitCode: number;
  /** Standard output. */
  stdout: string;
  /** Standard error. */
  stderr: string;
}

/** Runs argv with recorded output: one POST, one wait, two log reads (then deleted). */
export async function execRecorded(
  client: IncusClient,
  name: string,
  argv: string[],
  opts: {
    step: string;
    user?: GuestUser;
    env?: Record<string, string>;
    cwd?: string;
    deadlineMs?: number;
  },
): Promise<Recorded> {
  const user = opts.user ?? ROOT;
  const r = await client.call("POST", `/1.0/instances/${encodeURIComponent(name)}/exec`, {
    body: {
      command: argv,
      environment: { ...baseEnv(user), ...opts.env },
      user: user.uid,
      group: user.gid,
      cwd: opts.cwd ?? user.home,
      "wait-for-websocket": false,
      interactive: false,
      "record-output": true,
    },
  });
  if (r.kind !== "async") {
    throw new IsbError("protocol", `${opts.step}: exec answered without an operation`);
  }
  const op = await waitLong(client, r, {
    step: opts.step,
    deadlineMs: opts.deadlineMs ?? 3_600_000,
  });
  const meta = (op.metadata ?? {}) as { return?: number; output?: Record<string, string> };
  const read = async (fd: string) => {
    const path = meta.output?.[fd];
    if (!path) return "";
    const res = await client.raw("GET", path);
    await client.raw("DELETE", path).catch(() => {});
    return res.status < 300 ? new TextDecoder().decode(res.body) : "";
  };
  const [stdout, stderr] = await Promise.all([read("1"), read("2")]);
  return { exitCode: meta.return ?? -1, stdout, stderr };
}

/** Runs argv and captures stdout; a non-zero exit fails with `step` and stderr's end. */
export async function capture(
  client: IncusClient,
  name: string,
  argv: string[],
  opts: { step: string; user?: GuestUser; env?: Record<string, string> },
): Promise<string> {
  const r = await execRecorded(client, name, argv, { ...opts, deadlineMs: 300_000 });
  if (r.exitCode !== 0) {
    const err = r.stderr.trim().split("\n").slice(-3).join(" | ");
    throw new IsbError("operation_failed", `${opts.step} in "${name}": exit ${r.exitCode}: ${err}`);
  }
  return r.stdout;
}

/**
 * Runs `bash -euo pipefail -c script` in the guest; resolves its exit code. Its output
 * goes to a file in the guest that is read while the script runs, so `onLine` sees the
 * lines as they are written.
 */
export async function runScript(
  client: IncusClient,
  name: string,
  script: string,
  opts: ScriptOptions = {},
): Promise<number> {
  const onLine = opts.onLine ?? (() => {});
  const log = `/var/tmp/isx-out-${crypto.randomUUID().slice(0, 8)}`;
  const argv = [
    "sh",
    "-c",
    // incusd reports an exit status of 126/127 as "not executable"/"Command not found"
    // whatever exited so, so the script's own 126/127 travel as 226/227 (mapped back below)
    'f="$1"; shift; "$@" >"$f" 2>&1 </dev/null; rc=$?; case $rc in 126|127) exit $((rc+100));; esac; exit $rc',
    "sh",
    log,
    "bash",
    "-euo",
    "pipefail",
    "-c",
    script,
    "isx",
    ...(opts.args ?? []),
  ];
  let shown = 0;
  let partial = "";
  const follow = async () => {
    try {
      const f = await client.pullFile(name, log);
      if (f.data.length <= shown) return;
      const text = partial + new TextDecoder().decode(f.data.subarray(shown));
      shown = f.data.length;
      const parts = text.split("\n");
      partial = parts.pop() ?? "";
      for (const l of parts) onLine(l);
    } catch { /* not written yet */ }
  };
  let done = false;
  const follower = (async () => {
    while (!done) {
      await sleep(700);
      if (!done) await follow();
    }
  })();
  let r: Recorded;
  try {
    r = await execRecorded(client, name, argv, {
      step: `run a script in ${name}`,
      ...(opts.user ? { user: opts.user } : {}),
      ...(opts.env ? { env: opts.env } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
  } finally {
    done = true;
    await follower;
  }
  await follow();
  if (partial) onLine(partial);
  await client.deleteFile(name, log, { step: "remove the script log" }).catch(() => {});
  // 127/126 here mean incusd found no `sh` at all; 227/226 are the script's own 127/126
  return r.exitCode === 227 || r.exitCode === 226 ? r.exitCode - 100 : r.exitCode;
}

/** Looks up a guest user by name (`getent passwd`). */
export async function guestUser(
  client: IncusClient,
  name: string,
  user: string,
): Promise<GuestUser> {
  const out = await capture(client, name, ["getent", "passwd", user], {
    step: `look up user ${user}`,
  });
  const f = out.trim().split(":");
  if (f.length < 7) {
    throw new IsbError("not_found", `look up user ${user} in "${name}": no such user`);
  }
  return { name: user, uid: Number(f[2]), gid: Number(f[3]), home: f[5]! };
}
