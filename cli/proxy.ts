/**
 * `isx proxy`: the credential-injecting, counting proxy (proxy/mod.ts). `isx proxy` (or
 * `proxy run`) serves in the foreground; `start|stop|restart|status` manage it as a
 * background process through the pid, token and log files in `<stateDir>/proxy/` and its
 * `/health` (proxy_lifecycle.ts, proxy_status.ts); `install|uninstall` keep it running across
 * reboots (proxy_install.ts); `dump` prints what it holds (secrets as lengths); `logs`
 * shows the log; `activity` shows every instance's counts.
 *
 * `start` runs this same program again (`deno run <union flags> main.ts proxy run`, or the
 * compiled binary with `proxy run`), detached, logging to the log file, and returns once
 * `/health` answers with that child's pid. `stop` presents the token the proxy wrote (mode
 * 0600) to `POST /shutdown`, so stopping needs no right to signal processes.
 *
 * `run` (proxy_run.ts), `status` and `account` are imported when they run: the long-running
 * proxy process keeps every module it loaded, and the last two load the MCP layer (issue 11).
 *
 * @module
 */

import { loadProxyConfig, readRunFiles, runPaths } from "../proxy/mod.ts";
import { IsbError } from "../rpc/errors.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { activity, logs, out, type Values } from "./proxy_view.ts";
import { ACCOUNT_HELP } from "./proxy_help.ts";
import { install, uninstall } from "./proxy_install.ts";
import { launch, start, stopProxy } from "./proxy_lifecycle.ts";

const HELP = `Usage: isx proxy [run|start|stop|restart|status|install|uninstall|dump|logs|activity|
                  account] [options]

The host proxy: guests hold placeholders, the proxy injects the real credentials from
~/.config/isx/credentials.yaml (mode 0600) and counts every instance's model calls and
traffic. A credentials file with no credentials yet (what isx init writes) is fine: the
proxy runs and names the namespaces that have none. A change of credentials.yaml applies
within 2 s without a restart; any value may be { command: [gh, auth, token], ttl: 55m }.
See docs/proxy.md.

  run (default)  serve in the foreground until SIGINT/SIGTERM
  start          start in the background; waits until /health answers and what
                 it needs holds (exit 2 if still retrying after 30 s)
  stop           stop the background proxy
  restart        stop, then start
  status         the proxy's state, its build against this isx's ("drift"), missing
                 credentials, a credentials file it could not apply, each credential
                 command's state, and config changed since start; exit status:
                   0 running          answers, DNS points at it, on the bridge's gateway
                   1 not_running      nothing answers: isx proxy start
                   2 waiting_for_dns  answers, but the bridge DNS does not point at it yet
                   2 converging       answers, but still retries what it needs (nft
                                      tables, the instance listing); see --json's why
                   2 stale_dns        nothing answers, but the bridge DNS still points at it
                   2 stale_gateway    answers on an address that is no longer the gateway
                   3 unknown          something else answers on the ops port
  install        keep it running across reboots (systemd unit, else an @reboot cron
                 line, else a boot script to run from your init)
  uninstall      undo install
  dump           what the running proxy holds: config, listeners, credentials as
                 names, kinds and lengths (never values), known instances
  logs           print the log (-n LINES, -f to follow)
  activity       every instance's counts (table; --json, --plain; --watch)
  account        which account each instance uses: list | set <inst> NS=NAME | unset
                 <inst> NS (isx proxy account --help)

Options:
  --json               activity/status as JSON (activity: an array of records)
  --plain              activity as tab-separated lines ("-" for empty)
  --format F           table | plain | json
  -w, --watch          activity: refresh in place every --interval seconds (default 2)
  --interval S         seconds between refreshes
  -n, --lines N        logs: the last N lines (default 50)
  -f, --follow         logs: keep printing new lines
  --url URL            the proxy's ops address (default http://127.0.0.1:<proxy.ports.health>)
  --log-file PATH      run: log there instead of stderr

${ACCOUNT_HELP}`;

const SUBS = [
  "run",
  "start",
  "stop",
  "restart",
  "status",
  "install",
  "uninstall",
  "dump",
  "logs",
  "activity",
] as const;

function sub(rest: string[]): string {
  const first = rest.find((a) => !a.startsWith("-"));
  return first ?? "run";
}

async function opsUrl(ctx: CliContext, values: Values): Promise<string> {
  if (typeof values.url === "string") return values.url.replace(/\/$/, "");
  const config = await loadProxyConfig(`${ctx.perm.configDir}/config.yaml`);
  return `http://127.0.0.1:${config.ports.health}`;
}

/** `isx proxy dump`: the running proxy's `/dump`, with the token only its owner can read. */
async function dump(ctx: CliContext, url: string): Promise<number> {
  const { token } = await readRunFiles(ctx.perm.stateDir);
  if (!token) {
    throw new IsbError("not_ready", `dump proxy: no proxy started here answers: isx proxy status`);
  }
  let res: Response;
  try {
    res = await fetch(`${url}/dump`, {
      headers: { "x-isx-proxy-token": token },
      signal: AbortSignal.timeout(5000),
    });
  } catch (e) {
    throw new IsbError("connect", `dump proxy: no answer at ${url}: ${(e as Error).message}`);
  }
  const text = await res.text();
  if (!res.ok) {
    throw new IsbError("forbidden", `dump proxy: ${url}/dump answered HTTP ${res.status}`);
  }
  out(text.trimEnd());
  return 0;
}

/** `isx proxy`. */
export const proxyCommand: Command = {
  name: "proxy",
  progs: ["isx"],
  summary: "the credential-injecting, counting proxy (run, start, stop, status, logs, activity)",
  help: HELP,
  mode: (rest) => {
    const s = sub(rest);
    return s === "run" ? "proxy" : s === "account" ? "instances" : "proxy-ctl";
  },
  async run(rest, ctx) {
    const at = rest.findIndex((a) => !a.startsWith("-"));
    if (rest[at] === "account") {
      return await (await import("./proxy_account.ts")).accountCommand(rest.slice(at + 1), ctx);
    }
    const { values, positionals } = parseCommandArgs(rest, {
      json: { type: "boolean" },
      plain: { type: "boolean" },
      format: { type: "string" },
      watch: { type: "boolean", short: "w" },
      interval: { type: "string" },
      lines: { type: "string", short: "n" },
      follow: { type: "boolean", short: "f" },
      url: { type: "string" },
      "log-file": { type: "string" },
    });
    const name = positionals[0] ?? "run";
    if (!(SUBS as readonly string[]).includes(name) || positionals.length > 1) {
      throw new UsageError(`unknown subcommand "${positionals.join(" ")}"`);
    }
    if (name === "run") return await (await import("./proxy_run.ts")).runForeground(ctx, values);
    if (name === "logs") return await logs(ctx, values);
    const url = await opsUrl(ctx, values);
    if (name === "start") return await start(ctx, url);
    if (name === "stop") return await stopProxy(ctx, url);
    if (name === "restart") {
      await stopProxy(ctx, url);
      return await start(ctx, url);
    }
    if (name === "status") {
      return await (await import("./proxy_status.ts")).status(ctx, url, values.json === true);
    }
    const script = `${runPaths(ctx.perm.stateDir).dir}/boot.sh`;
    if (name === "install") {
      await Deno.mkdir(runPaths(ctx.perm.stateDir).dir, { recursive: true, mode: 0o700 });
      return await install(ctx, launch(ctx), script);
    }
    if (name === "uninstall") return await uninstall(ctx, script);
    if (name === "dump") return await dump(ctx, url);
    return await activity(ctx, url, values);
  },
};
