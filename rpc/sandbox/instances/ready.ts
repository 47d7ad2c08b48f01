/**
 * Readiness (isb-rpc.md §10): checks run in order against one shared deadline, each polled
 * every 250 ms on the injected clock and always tried at least once; every probe exec is
 * capped at 20 s. While waiting, the instance's state is watched: one that has been neither
 * Running nor Starting for 30 s is started once more (a guest-initiated reboot that did not
 * complete), and a second sustained stop, or a failed start, fails at once.
 *
 * @module
 */

import { IsbError, isNotFound } from "../../errors.ts";
import { formatDuration } from "../../duration.ts";
import type { IncusClient } from "../../incus/mod.ts";
import type { Clock } from "../../clock.ts";
import { resolveExecUser } from "../exec/user.ts";
import type { ExecDefaults, ReadyCheck } from "../spec/spec.ts";

export type { ReadyCheck };

/** The exec defaults a check may use (only `user` matters, for `path_writable`). */
export type ReadyExecDefaults = Pick<ExecDefaults, "user">;

/** Options of {@link waitReady}. */
export interface WaitReadyOptions {
  checks: readonly ReadyCheck[];
  timeoutMs: number;
  exec?: ReadyExecDefaults | undefined;
  clock: Clock;
  /** How long a stop must last before it counts (30 s). */
  stoppedGraceMs?: number;
}

/** Poll interval of every check. */
export const READY_POLL_MS = 250;
/** Cap of one probe exec. */
export const PROBE_TIMEOUT_MS = 20_000;

/** The check as messages name it: `running`, `user_exists(dev)`, `command(a b)`. */
export function checkName(c: ReadyCheck): string {
  if (typeof c === "string") return c;
  if ("user_exists" in c) return `user_exists(${c.user_exists})`;
  if ("path_writable" in c) return `path_writable(${c.path_writable})`;
  return `command(${c.command.join(" ")})`;
}

/** True when `/proc/net/route` or `/proc/net/ipv6_route` text has a default route. */
export function hasDefaultRoute(v4: string, v6: string): boolean {
  const lines = (t: string) => t.split("\n").map((l) => l.trim().split(/\s+/));
  const four = lines(v4).slice(1).some((f) =>
    f.length > 3 && f[1] === "00000000" && (parseInt(f[3]!, 16) & 1) === 1
  );
  const six = lines(v6).some((f) =>
    f.length >= 10 && /^0+$/.test(f[0]!) && f[1] === "00" && f[9] !== "lo"
  );
  return four || six;
}

function notReady(name: string, check: string, detail: string, waitedMs: number): IsbError {
  return new IsbError(
    "not_ready",
    `sandbox ${name} not ready after ${formatDuration(waitedMs)}: ${check} (${detail})`,
    { data: { sandbox: name, check, detail, waited_secs: waitedMs / 1000 } },
  );
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function capture(incus: IncusClient, name: string, argv: string[]) {
  return await incus.execCapture(name, argv, { timeoutMs: PROBE_TIMEOUT_MS });
}

/** Instance status, or undefined when it is gone. */
async function status(incus: IncusClient, name: string): Promise<string | undefined> {
  try {
    return (await incus.getInstance(name)).value.status;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** Runs one check once: true passed, false "not yet"; a throw is its detail. */
export async function runCheck(
  incus: IncusClient,
  name: string,
  check: ReadyCheck,
  exec?: ReadyExecDefaults,
): Promise<boolean> {
  if (check === "running") return (await status(incus, name))?.toLowerCase() === "running";
  if (check === "agent") return (await capture(incus, name, ["true"])).exitCode === 0;
  if (check === "default_route") {
    const v4 = await capture(incus, name, ["cat", "/proc/net/route"]);
    const v6 = await capture(incus, name, ["cat", "/proc/net/ipv6_route"]).catch(() => undefined);
    return hasDefaultRoute(text(v4.stdout), v6 ? text(v6.stdout) : "");
  }
  if ("user_exists" in check) {
    return (await capture(incus, name, ["getent", "passwd", check.user_exists])).exitCode === 0;
  }
  if ("path_writable" in check) {
    const argv = ["test", "-w", check.path_writable];
    if (exec?.user === undefined || exec.user === "") {
      return (await capture(incus, name, argv)).exitCode === 0;
    }
    const u = await resolveExecUser(incus, name, String(exec.user));
    const env: Record<string, string> = {};
    if (u.entry) {
      Object.assign(env, { HOME: u.entry.home, USER: u.entry.name, LOGNAME: u.entry.name });
    }
    const r = await incus.execCapture(name, argv, {
      timeoutMs: PROBE_TIMEOUT_MS,
      user: u.uid,
      group: u.gid,
      env,
      ...(u.entry?.home ? { cwd: u.entry.home } : {}),
    });
    return r.exitCode === 0;
  }
  return (await capture(incus, name, check.command)).exitCode === 0;
}

/** Waits until every check passes; `not_ready` on the deadline or a sustained stop. */
export async function waitReady(
  incus: IncusClient,
  name: string,
  opts: WaitReadyOptions,
): Promise<void> {
  const { clock } = opts;
  const grace = opts.stoppedGraceMs ?? 30_000;
  const started = clock.now();
  let restarted = false;
  for (const check of opts.checks) {
    let last = "not yet";
    let stoppedSince: number | undefined;
    while (true) {
      try {
        if (await runCheck(incus, name, check, opts.exec)) break;
        last = "not yet";
      } catch (e) {
        last = e instanceof Error ? e.message : String(e);
      }
      const st = await status(incus, name).catch(() => "");
      if (st !== undefined && st !== "") {
        const s = st.toLowerCase();
        if (s === "running" || s === "starting") {
          stoppedSince = undefined;
        } else if (clock.now() - (stoppedSince ??= clock.now()) >= grace) {
          if (!restarted) {
            restarted = true;
            stoppedSince = undefined;
            const ok = await incus.startInstance(name, { step: `start ${name}` })
              .then(() => true, () => false);
            if (ok) continue;
          }
          const again = restarted ? ", and a restart did not stick" : "";
          const detail = `instance is ${st} (it stopped while getting ready${again}; ` +
            `see \`incus info --show-log ${name}\`)`;
          throw notReady(name, checkName(check), detail, clock.now() - started);
        }
      }
      if (clock.now() - started >= opts.timeoutMs) {
        throw notReady(name, checkName(check), last, clock.now() - started);
      }
      await clock.sleep(READY_POLL_MS);
    }
  }
}
