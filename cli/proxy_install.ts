/**
 * `isx proxy install|uninstall`: keep the proxy running across reboots of this host, with
 * whatever this host runs at boot (docs/proxy.md "Across reboots"):
 *
 * - **systemd** (PID 1 is systemd): a unit `isx-proxy.service`, system-wide for root
 *   (`/etc/systemd/system`), else a user unit (`$XDG_CONFIG_HOME/systemd/user`; with
 *   `loginctl enable-linger` it starts without a login), enabled and started with
 *   `Restart=on-failure`;
 * - **cron** (no systemd, `crontab` present): an `@reboot` line, tagged `# isx-proxy`, in the
 *   user's crontab, running the boot script below;
 * - **neither** (a container or micro-VM whose PID 1 starts nothing, like the build
 *   machines): the boot script alone, and the advice to run it from whatever starts this
 *   host's daemons.
 *
 * Every method runs the same boot script, `<stateDir>/proxy/boot.sh`: `isx proxy start` with
 * the program, flags and socket of this install. Beside the proxy it starts the warm-pool
 * keeper (`isx pool keep`, cli/pool.ts; a process and permission mode of its own): under
 * systemd as a second unit `isx-pool.service`, else in the background from the boot script
 * (logging to `<stateDir>/pool/keeper.log`). `uninstall` undoes whichever was done.
 * The texts are pure ({@link unitText}, {@link bootScript}, {@link cronWith}).
 *
 * @module
 */

import { IsbError } from "../rpc/errors.ts";
import type { CliContext } from "./command.ts";
import { out } from "./proxy_view.ts";

/** The unit's name. */
export const UNIT = "isx-proxy.service";
/** The keeper's unit's name. */
export const POOL_UNIT = "isx-pool.service";
const CRON_TAG = "# isx-proxy";

function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * The boot script: the keeper in the background (when `keeper` is given), then `isx proxy
 * start` as this install runs it (pure).
 */
export function bootScript(
  argv: readonly string[],
  env: Record<string, string>,
  keeper?: { argv: readonly string[]; log: string },
): string {
  const exports = Object.entries(env).map(([k, v]) => `export ${k}=${shQuote(v)}`);
  const keep = keeper
    ? [
      `mkdir -p ${shQuote(keeper.log.replace(/\/[^/]*$/, ""))}`,
      `nohup ${keeper.argv.map(shQuote).join(" ")} >>${shQuote(keeper.log)} 2>&1 </dev/null &`,
    ]
    : [];
  return [
    "#!/bin/sh",
    "# written by isx proxy install; removed by isx proxy uninstall",
    // cron's @reboot (and a bare boot hook) has PATH=/usr/bin:/bin; the proxy runs nft
    'PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"; export PATH',
    ...exports,
    ...keep,
    `exec ${argv.map(shQuote).join(" ")}`,
    "",
  ].join("\n");
}

/** The systemd unit running `argv` in the foreground (pure). */
export function unitText(argv: readonly string[], env: Record<string, string>, user: boolean) {
  // systemd's own quoting: double quotes, backslash and dollar escaped
  const q = (s: string) => `"${s.replace(/[\\"]/g, "\\$&").replaceAll("$", "$$$$")}"`;
  return [
    "# written by isx proxy install; removed by isx proxy uninstall",
    "[Unit]",
    "Description=isx proxy (credential injection and counting for isx instances)",
    "After=network-online.target incus.service",
    "Wants=network-online.target",
    "",
    "[Service]",
    ...Object.entries(env).map(([k, v]) => `Environment=${q(`${k}=${v}`)}`),
    `ExecStart=${argv.map(q).join(" ")}`,
    "Restart=on-failure",
    "RestartSec=5",
    "",
    "[Install]",
    `WantedBy=${user ? "default.target" : "multi-user.target"}`,
    "",
  ].join("\n");
}

/** The keeper's systemd unit: `isx pool keep`, after the proxy (pure). */
export function poolUnitText(
  argv: readonly string[],
  env: Record<string, string>,
  user: boolean,
): string {
  return unitText(argv, env, user)
    .replace(/^Description=.*$/m, "Description=isx warm-pool keeper (started instances to claim)")
    .replace(/^After=(.*)$/m, `After=$1 ${UNIT}`);
}

/** The crontab with our `@reboot` line replaced (or removed when `script` is undefined). */
export function cronWith(existing: string, script: string | undefined): string {
  const kept = existing.split("\n").filter((l) => !l.endsWith(CRON_TAG) && l !== "");
  if (script) kept.push(`@reboot ${shQuote(script)} >/dev/null 2>&1 ${CRON_TAG}`);
  return kept.length ? kept.join("\n") + "\n" : "";
}

/** The program, flags and arguments that start this install's proxy in the background. */
export interface Launch {
  /** argv of `isx proxy start` (for the boot script). */
  start: string[];
  /** argv of `isx proxy run` in the foreground (for the unit). */
  run: string[];
  /** argv of `isx pool keep` (the warm-pool keeper), and where the boot script logs it. */
  keep?: { argv: string[]; log: string };
  /** Environment both need (HOME, XDG dirs, the commit). */
  env: Record<string, string>;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

async function runCmd(argv: string[], stdin?: string): Promise<string> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(argv[0]!, {
      args: argv.slice(1),
      stdin: stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    throw new IsbError("io", `run ${argv.join(" ")}: ${(e as Error).message}`);
  }
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const r = await child.output();
  const text = new TextDecoder();
  if (!r.success) {
    const err = text.decode(r.stderr).trim().split("\n").slice(-2).join(" | ");
    throw new IsbError("operation_failed", `${argv.join(" ")}: exit ${r.code}: ${err}`);
  }
  return text.decode(r.stdout);
}

/** How this host starts things at boot. */
export async function bootMethod(): Promise<"systemd" | "cron" | "none"> {
  const pid1 = await Deno.readTextFile("/proc/1/comm").catch(() => "");
  if (pid1.trim() === "systemd") return "systemd";
  for (const dir of ["/usr/bin", "/bin", "/usr/local/bin"]) {
    if (await exists(`${dir}/crontab`)) return "cron";
  }
  return "none";
}

function unitPath(ctx: CliContext, unit = UNIT): { path: string; user: boolean } {
  const user = Deno.uid() !== 0;
  // the user unit directory sits beside isx's config directory (XDG_CONFIG_HOME)
  const config = ctx.perm.configDir.replace(/\/isx$/, "");
  return user
    ? { path: `${config}/systemd/user/${unit}`, user }
    : { path: `/etc/systemd/system/${unit}`, user };
}

/** `isx proxy install`. */
export async function install(ctx: CliContext, launch: Launch, script: string): Promise<number> {
  const method = await bootMethod();
  // under systemd the keeper has its own unit; elsewhere the boot script starts it
  const scripted = method === "systemd" ? undefined : launch.keep;
  await Deno.writeTextFile(script, bootScript(launch.start, launch.env, scripted), {
    mode: 0o700,
  });
  await Deno.chmod(script, 0o700);
  if (method === "systemd") {
    const { path, user } = unitPath(ctx);
    await Deno.mkdir(path.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.writeTextFile(path, unitText(launch.run, launch.env, user));
    const sc = user ? ["systemctl", "--user"] : ["systemctl"];
    if (launch.keep) {
      const pool = unitPath(ctx, POOL_UNIT).path;
      await Deno.writeTextFile(pool, poolUnitText(launch.keep.argv, launch.env, user));
    }
    await runCmd([...sc, "daemon-reload"]);
    await runCmd([...sc, "enable", UNIT]);
    if (launch.keep) {
      await runCmd([...sc, "enable", POOL_UNIT]);
      out(`isx proxy: installed ${unitPath(ctx, POOL_UNIT).path} (the warm-pool keeper)`);
    }
    out(`isx proxy: installed ${path} (enabled; starts at boot${user ? " of your user" : ""})`);
    out(`  now: isx proxy stop && ${sc.join(" ")} start ${UNIT}`);
    if (user) out("  without a login: loginctl enable-linger");
    return 0;
  }
  if (method === "cron") {
    const now = await runCmd(["crontab", "-l"]).catch(() => "");
    await runCmd(["crontab", "-"], cronWith(now, script));
    out(`isx proxy: installed an @reboot line in your crontab running ${script}`);
    if (launch.keep) out(`  it starts the warm-pool keeper too (log ${launch.keep.log})`);
    return 0;
  }
  out(`isx proxy: this host runs neither systemd nor cron, so nothing starts programs at boot.`);
  out(
    `  wrote ${script}: run it from whatever starts this host's daemons (it runs isx proxy start)`,
  );
  return 0;
}

/** `isx proxy uninstall`. */
export async function uninstall(ctx: CliContext, script: string): Promise<number> {
  const method = await bootMethod();
  const done: string[] = [];
  if (method === "systemd") {
    const { path, user } = unitPath(ctx);
    const sc = user ? ["systemctl", "--user"] : ["systemctl"];
    for (const [unit, file] of [[UNIT, path], [POOL_UNIT, unitPath(ctx, POOL_UNIT).path]]) {
      if (!(await exists(file!))) continue;
      await runCmd([...sc, "disable", unit!]).catch(() => "");
      await Deno.remove(file!);
      await runCmd([...sc, "daemon-reload"]).catch(() => "");
      done.push(`removed ${file}`);
    }
  } else if (method === "cron") {
    const now = await runCmd(["crontab", "-l"]).catch(() => "");
    const next = cronWith(now, undefined);
    if (next !== now) {
      await runCmd(["crontab", "-"], next);
      done.push("removed the @reboot line from your crontab");
    }
  }
  if (await exists(script)) {
    await Deno.remove(script);
    done.push(`removed ${script}`);
  }
  out(`isx proxy: ${done.length ? done.join("; ") : "nothing was installed"}`);
  return 0;
}
