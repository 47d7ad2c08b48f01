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
 * the program, flags and socket of this install. `uninstall` undoes whichever was done.
 * The texts are pure ({@link unitText}, {@link bootScript}, {@link cronWith}).
 *
 * @module
 */

import { IsbError } from "../rpc/errors.ts";
import type { CliContext } from "./command.ts";
import { out } from "./proxy_view.ts";

/** The unit's name. */
export const UNIT = "isx-proxy.service";
const CRON_TAG = "# isx-proxy";

function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The boot script: `isx proxy start` as this install runs it (pure). */
export function bootScript(argv: readonly string[], env: Record<string, string>): string {
  const exports = Object.entries(env).map(([k, v]) => `export ${k}=${shQuote(v)}`);
  return [
    "#!/bin/sh",
    "# written by isx proxy install; removed by isx proxy uninstall",
    ...exports,
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

function unitPath(ctx: CliContext): { path: string; user: boolean } {
  const user = Deno.uid() !== 0;
  // the user unit directory sits beside isx's config directory (XDG_CONFIG_HOME)
  const config = ctx.perm.configDir.replace(/\/isx$/, "");
  return user
    ? { path: `${config}/systemd/user/${UNIT}`, user }
    : { path: `/etc/systemd/system/${UNIT}`, user };
}

/** `isx proxy install`. */
export async function install(ctx: CliContext, launch: Launch, script: string): Promise<number> {
  const method = await bootMethod();
  await Deno.writeTextFile(script, bootScript(launch.start, launch.env), { mode: 0o700 });
  await Deno.chmod(script, 0o700);
  if (method === "systemd") {
    const { path, user } = unitPath(ctx);
    await Deno.mkdir(path.replace(/\/[^/]*$/, ""), { recursive: true });
    await Deno.writeTextFile(path, unitText(launch.run, launch.env, user));
    const sc = user ? ["systemctl", "--user"] : ["systemctl"];
    await runCmd([...sc, "daemon-reload"]);
    await runCmd([...sc, "enable", UNIT]);
    out(`isx proxy: installed ${path} (enabled; starts at boot${user ? " of your user" : ""})`);
    out(`  now: isx proxy stop && ${sc.join(" ")} start ${UNIT}`);
    if (user) out("  without a login: loginctl enable-linger");
    return 0;
  }
  if (method === "cron") {
    const now = await runCmd(["crontab", "-l"]).catch(() => "");
    await runCmd(["crontab", "-"], cronWith(now, script));
    out(`isx proxy: installed an @reboot line in your crontab running ${script}`);
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
    if (await exists(path)) {
      const sc = user ? ["systemctl", "--user"] : ["systemctl"];
      await runCmd([...sc, "disable", UNIT]).catch(() => "");
      await Deno.remove(path);
      await runCmd([...sc, "daemon-reload"]).catch(() => "");
      done.push(`removed ${path}`);
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
