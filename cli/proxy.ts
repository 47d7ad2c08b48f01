/**
 * `isx proxy`: the credential-injecting, counting proxy (proxy/mod.ts). `isx proxy` (or
 * `proxy run`) serves in the foreground; `start|stop|restart|status` manage it as a
 * background process through the pid, token and log files in `<stateDir>/proxy/` and its
 * `/health`; `logs` shows the log; `activity` shows every instance's counts.
 *
 * `start` runs this same program again (`deno run <union flags> main.ts proxy run`, or the
 * compiled binary with `proxy run`), detached, logging to the log file, and returns once
 * `/health` answers with that child's pid. `stop` presents the token the proxy wrote (mode
 * 0600) to `POST /shutdown`, so stopping needs no right to signal processes.
 *
 * @module
 */

import {
  type HealthInfo,
  loadProxyConfig,
  newToken,
  readRunFiles,
  removeRunFiles,
  runPaths,
  startHostProxy,
  writeRunFiles,
} from "../proxy/mod.ts";
import { IsbError, isLogLevel, log, setLogLevel, setLogSink } from "../rpc/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { unionFlags } from "./permissions.ts";
import { activity, getJson, logs, out, type Values } from "./proxy_view.ts";
import { ACCOUNT_HELP, accountCommand, toolRules } from "./proxy_account.ts";

const HELP = `Usage: isx proxy [run|start|stop|restart|status|logs|activity|account] [options]

The host proxy: guests hold placeholders, the proxy injects the real credentials from
~/.config/isx/credentials.yaml (mode 0600) and counts every instance's model calls and
traffic. See docs/proxy.md.

  run (default)  serve in the foreground until SIGINT/SIGTERM
  start          start in the background; waits until /health answers
  stop           stop the background proxy
  restart        stop, then start
  status         running | not running | stale; exit 0 | 1 | 2 (3 = unknown)
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

const SUBS = ["run", "start", "stop", "restart", "status", "logs", "activity"] as const;
const enc = new TextEncoder();

function sub(rest: string[]): string {
  const first = rest.find((a) => !a.startsWith("-"));
  return first ?? "run";
}

async function opsUrl(ctx: CliContext, values: Values): Promise<string> {
  if (typeof values.url === "string") return values.url.replace(/\/$/, "");
  const config = await loadProxyConfig(`${ctx.perm.configDir}/config.yaml`);
  return `http://127.0.0.1:${config.ports.health}`;
}

type State = "running" | "not_running" | "stale" | "unknown";
const STATE_EXIT: Record<State, number> = { running: 0, not_running: 1, stale: 2, unknown: 3 };

async function probe(
  ctx: CliContext,
  url: string,
): Promise<{ state: State; pid?: number; health?: HealthInfo }> {
  const files = await readRunFiles(ctx.perm.stateDir);
  const got = await getJson(`${url}/health`);
  if (got?.status === 200) {
    const health = got.body as HealthInfo;
    return {
      state: typeof health.pid === "number" ? "running" : "unknown",
      pid: health.pid,
      health,
    };
  }
  if (got) return { state: "unknown", ...(files.pid ? { pid: files.pid } : {}) };
  return files.pid ? { state: "stale", pid: files.pid } : { state: "not_running" };
}

async function runForeground(ctx: CliContext, values: Values): Promise<number> {
  const level = ctx.env.ISX_LOG;
  setLogLevel(level && isLogLevel(level) ? level : "info");
  let file: Deno.FsFile | undefined;
  if (typeof values["log-file"] === "string") {
    file = await Deno.open(values["log-file"], { append: true, create: true, mode: 0o600 });
    const f = file;
    setLogSink((line) => f.writeSync(enc.encode(line + "\n")));
  }
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  const token = newToken();
  const proxy = await startHostProxy({ ...ctx.perm, socket: ctx.global.socket }, {
    shutdown: { token, onShutdown: () => stop() },
    toolRules: toolRules(ctx),
  });
  await writeRunFiles(ctx.perm.stateDir, Deno.pid, token);
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, stop);
  log.info("proxy: started", { pid: Deno.pid, ca: proxy.handle.caFingerprint });
  await stopped;
  for (const s of signals) Deno.removeSignalListener(s, stop);
  log.info("proxy: stopping", { pid: Deno.pid });
  // The files go first: once /health stops answering, `status` must say "not running".
  await removeRunFiles(ctx.perm.stateDir, Deno.pid);
  await proxy.close();
  log.info("proxy: stopped", { pid: Deno.pid });
  file?.close();
  return 0;
}

async function start(ctx: CliContext, url: string): Promise<number> {
  const now = await probe(ctx, url);
  if (now.state === "running") {
    out(`isx proxy: already running (pid ${now.pid})`);
    return 0;
  }
  if (now.state === "stale") await removeRunFiles(ctx.perm.stateDir);
  const paths = runPaths(ctx.perm.stateDir);
  await Deno.mkdir(paths.dir, { recursive: true, mode: 0o700 });
  const compiled = !/\/deno$/.test(ctx.perm.execPath);
  const dir = ctx.perm.programDir;
  const args = compiled ? [] : [
    "run",
    "--quiet",
    "--cached-only",
    "--config",
    `${dir}/deno.json`,
    ...unionFlags(ctx.perm),
    `${dir}/main.ts`,
  ];
  args.push("--socket", ctx.global.socket, "proxy", "run", "--log-file", paths.log);
  const logStart = await Deno.stat(paths.log).then((s) => s.size, () => 0);
  const child = new Deno.Command(ctx.perm.execPath, {
    args,
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
  let exited: Deno.CommandStatus | undefined;
  child.status.then((s) => (exited = s));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && !exited) {
    const p = await probe(ctx, url);
    if (p.state === "running" && p.pid === child.pid) {
      child.unref();
      out(`isx proxy: started (pid ${child.pid}); ops ${url}; log ${paths.log}`);
      return 0;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const text = await Deno.readTextFile(paths.log).catch(() => "");
  const tail = new TextDecoder().decode(enc.encode(text).slice(logStart)).trim().split("\n").slice(
    -10,
  ).join("\n");
  if (!exited) child.unref();
  throw new IsbError(
    "not_ready",
    `start proxy: ${
      exited ? `it exited with code ${exited.code}` : `no answer at ${url}/health within 30 s`
    }` +
      (tail ? `:\n${tail}` : ""),
  );
}

async function stopProxy(ctx: CliContext, url: string): Promise<number> {
  const now = await probe(ctx, url);
  if (now.state !== "running") {
    if (now.state === "stale") await removeRunFiles(ctx.perm.stateDir);
    out(`isx proxy: not running${now.state === "stale" ? " (removed a stale pid file)" : ""}`);
    return 0;
  }
  const { pid, token } = await readRunFiles(ctx.perm.stateDir);
  if (!token || pid !== now.pid) {
    throw new IsbError(
      "forbidden",
      `stop proxy: the proxy answering at ${url} (pid ${now.pid}) has no token here; stop it where it runs`,
    );
  }
  const res = await fetch(`${url}/shutdown`, {
    method: "POST",
    headers: { "x-isx-proxy-token": token },
  });
  await res.body?.cancel();
  if (!res.ok) {
    throw new IsbError("forbidden", `stop proxy: ${url}/shutdown answered HTTP ${res.status}`);
  }
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if ((await probe(ctx, url)).state !== "running") {
      out(`isx proxy: stopped (pid ${pid})`);
      return 0;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new IsbError(
    "operation_timeout",
    `stop proxy: pid ${pid} still answers after 15 s; kill ${pid}`,
  );
}

async function status(ctx: CliContext, url: string, json: boolean): Promise<number> {
  const p = await probe(ctx, url);
  if (json) {
    out(JSON.stringify({ status: p.state, pid: p.pid ?? null, url, health: p.health ?? null }));
  } else if (p.state === "running") {
    const h = p.health!;
    out(
      `running (pid ${h.pid}, version ${h.version}, tls ${h.listen?.tls}, forward ${h.listen?.forward}, ` +
        `dns ${h.dnsConfigured ? "configured" : "NOT configured"}, CA ${
          h.caFingerprint.slice(0, 23)
        }…)`,
    );
  } else if (p.state === "stale") {
    out(`stale (pid file names ${p.pid}, but nothing answers at ${url})`);
  } else if (p.state === "not_running") out("not running");
  else out(`unknown (something answers at ${url}, but not like isx proxy)`);
  return STATE_EXIT[p.state];
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
    if (rest[at] === "account") return await accountCommand(rest.slice(at + 1), ctx);
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
    if (name === "run") return await runForeground(ctx, values);
    if (name === "logs") return await logs(ctx, values);
    const url = await opsUrl(ctx, values);
    if (name === "start") return await start(ctx, url);
    if (name === "stop") return await stopProxy(ctx, url);
    if (name === "restart") {
      await stopProxy(ctx, url);
      return await start(ctx, url);
    }
    if (name === "status") return await status(ctx, url, values.json === true);
    return await activity(ctx, url, values);
  },
};
