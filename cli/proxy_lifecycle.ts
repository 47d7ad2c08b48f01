/**
 * Starting and stopping the background proxy: `isx proxy start` runs this same program
 * again (`deno run <union flags> main.ts proxy run`, or the compiled binary with
 * `proxy run`), detached, logging to the log file, and returns once `/health` answers with
 * that child's pid and everything it needs holds (its `converging` list is empty: the bridge
 * DNS, the nft tables, the instance listing, which it retries with backoff), or says which
 * do not yet when the wait ends; a child that fails prints its reason (the log's "start
 * failed" line) and the log's path. `stop` presents the token the proxy wrote (mode 0600) to
 * `POST /shutdown`, so stopping needs no right to signal processes.
 *
 * @module
 */

import {
  type HealthInfo,
  readRunFiles,
  removeRunFiles,
  runLockFree,
  runPaths,
} from "../proxy/mod.ts";
import { IsbError } from "../rpc/errors.ts";
import type { CliContext } from "./command.ts";
import { unionFlags } from "./permissions.ts";
import type { Launch } from "./proxy_install.ts";
import { getJson, out } from "./proxy_view.ts";

const enc = new TextEncoder();

type State = "running" | "not_running" | "stale" | "unknown";

/** Whether the proxy answers, and with which pid. */
export async function probe(
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

/** This program as `deno run` (or the compiled binary) with its flags and socket. */
/**
 * V8 flags of the background proxy (`start`, `install`): a young generation capped at
 * 4 MiB semi-spaces instead of growing to 16 (issue 11: footprint; bench/proxy_bench.ts).
 */
export const PROXY_V8_FLAGS = "--max-semi-space-size=4";

function programArgs(ctx: CliContext): string[] {
  const compiled = !/\/deno$/.test(ctx.perm.execPath);
  const dir = ctx.perm.programDir;
  const args = compiled ? [] : [
    "run",
    "--quiet",
    "--cached-only",
    "--config",
    `${dir}/deno.json`,
    `--v8-flags=${PROXY_V8_FLAGS}`,
    ...unionFlags(ctx.perm),
    `${dir}/main.ts`,
  ];
  args.push("--socket", ctx.global.socket);
  // the background proxy asks the same incusd and serves the same member
  if (ctx.global.remote !== undefined) args.push("--remote", ctx.global.remote);
  if (ctx.global.target) args.push("--target", ctx.global.target);
  return args;
}

/** How install starts this proxy: the boot script's argv, the unit's, their environment. */
export function launch(ctx: CliContext): Launch {
  const up = (dir: string) => dir.replace(/\/[^/]+$/, "");
  // the directories this install uses, whatever the boot environment sets
  const env: Record<string, string> = {
    HOME: ctx.perm.home,
    XDG_CONFIG_HOME: up(ctx.perm.configDir),
    XDG_STATE_HOME: up(ctx.perm.stateDir),
    XDG_CACHE_HOME: up(ctx.perm.cacheDir),
  };
  if (ctx.env.ISX_GIT_SHA) env.ISX_GIT_SHA = ctx.env.ISX_GIT_SHA;
  // with --remote: the incus client config this install read, whatever the boot sets
  if (ctx.perm.incusConf) env.INCUS_CONF = ctx.perm.incusConf;
  const base = [ctx.perm.execPath, ...programArgs(ctx)];
  return {
    start: [...base, "proxy", "start"],
    run: [...base, "proxy", "run", "--log-file", runPaths(ctx.perm.stateDir).log],
    keep: { argv: [...base, "pool", "keep"], log: `${ctx.perm.stateDir}/pool/keeper.log` },
    env,
  };
}

/** `isx proxy start`. */
export async function start(ctx: CliContext, url: string): Promise<number> {
  const now = await probe(ctx, url);
  if (now.state === "running") {
    out(`isx proxy: already running (pid ${now.pid})`);
    return 0;
  }
  if (now.state === "stale") await removeRunFiles(ctx.perm.stateDir);
  const paths = runPaths(ctx.perm.stateDir);
  await Deno.mkdir(paths.dir, { recursive: true, mode: 0o700 });
  const args = programArgs(ctx);
  args.push("proxy", "run", "--log-file", paths.log);
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
  let answered: HealthInfo | undefined;
  while (Date.now() < deadline && !exited) {
    const p = await probe(ctx, url);
    if (p.state === "running" && p.pid === child.pid) answered = p.health;
    const pending = pendingNeeds(answered);
    if (answered && (pending.length === 0 || Date.now() + 200 >= deadline)) {
      child.unref();
      out(`isx proxy: started (pid ${child.pid}); ops ${url}; log ${paths.log}`);
      if (pending.length) {
        out(
          `isx proxy: still retrying what it needs: ${
            pending.map((n) => `${n.need} (${n.error})`).join("; ")
          }; see isx proxy status`,
        );
        return 2;
      }
      const missing = (answered as { missingCredentials?: string[] }).missingCredentials ?? [];
      if (missing.length) {
        out(
          `isx proxy: no credential yet for: ${missing.join(", ")}; their placeholders go ` +
            `upstream unchanged (add them to ${ctx.perm.configDir}/credentials.yaml, then ` +
            "isx proxy restart)",
        );
      }
      return 0;
    }
    await new Promise((r) => setTimeout(r, answered ? 100 : 200));
  }
  if (answered && !exited) {
    child.unref();
    throw new IsbError(
      "not_ready",
      `start proxy: pid ${child.pid} answered, then stopped answering; log: ${paths.log}`,
    );
  }
  const text = await Deno.readTextFile(paths.log).catch(() => "");
  const tail = new TextDecoder().decode(enc.encode(text).slice(logStart)).trim().split("\n").slice(
    -10,
  ).join("\n");
  if (!exited) child.unref();
  // the reason is the log's "start failed" line; otherwise show the log's end
  const failed = tail.split("\n").reverse().find((l) => l.includes("proxy: start failed"));
  const reason = failed ? /"error":"((?:[^"\\]|\\.)*)"/.exec(failed)?.[1] : undefined;
  throw new IsbError(
    "not_ready",
    `start proxy: ${
      exited ? `it exited with code ${exited.code}` : `no answer at ${url}/health within 30 s`
    }` +
      (reason ? `: ${JSON.parse(`"${reason}"`)}` : tail ? `:\n${tail}` : "") +
      `; log: ${paths.log}`,
  );
}

/** The needs a `/health` body says do not hold yet (none for an older proxy). */
function pendingNeeds(h: HealthInfo | undefined): { need: string; error: string }[] {
  const c = (h as { converging?: unknown } | undefined)?.converging;
  return Array.isArray(c) ? c.filter((n) => typeof n?.need === "string") : [];
}

/** `isx proxy stop`. */
export async function stopProxy(ctx: CliContext, url: string): Promise<number> {
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
    // stopped = its ops port closed and its cleanup (bridge DNS, nft tables) done: it holds
    // proxy.lock until then (a restart's start would otherwise race that cleanup)
    if (
      (await probe(ctx, url)).state !== "running" && await runLockFree(ctx.perm.stateDir)
    ) {
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
