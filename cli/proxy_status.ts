/**
 * `isx proxy status`: one of six states (shared/spec/isx-mcp.md §7.H) from the proxy's
 * `/health`, the pid file and the bridge as Incus has it now, with the line that says what
 * to do, and the proxy's build compared with this program's:
 *
 * | state             | exit | meaning                                                     |
 * | ----------------- | ---- | ----------------------------------------------------------- |
 * | `running`         | 0    | answers, DNS points at it, on the bridge's gateway          |
 * | `not_running`     | 1    | nothing answers (and no DNS left pointing at it)            |
 * | `waiting_for_dns` | 2    | answers, but the bridge DNS does not point at it (yet)      |
 * | `stale_dns`       | 2    | nothing answers, but the bridge DNS still sends names to it |
 * | `stale_gateway`   | 2    | answers on an address that is no longer the gateway         |
 * | `unknown`         | 3    | something answers on the ops port, but not like isx proxy   |
 *
 * @module
 */

import {
  classifyProxy,
  type Drift,
  PROXY_STATE_EXIT,
  type ProxyCredentials,
  type ProxyHealth,
  type ProxyState,
  readProxyHealth,
  versionDrift,
} from "../mcp/mod.ts";
import {
  dnsBlockGateway,
  gatewayOf,
  loadProxyConfig,
  readRunFiles,
  removeRunFiles,
} from "../proxy/mod.ts";
import { createIncusClient } from "../rpc/mod.ts";
import type { CliContext } from "./command.ts";
import { ownBuild } from "./instance_checks.ts";
import { out } from "./proxy_view.ts";
import { incusOptions } from "./incus_remote.ts";

/** What `status` found. */
export interface StatusReport {
  /** One of the six states. */
  state: ProxyState;
  /** Why, and what to do ("" when running). */
  why: string;
  /** The proxy's pid (answering, or named by a stale pid file). */
  pid: number | undefined;
  /** The `/health` body when it answered. */
  health: ProxyHealth | undefined;
  /** Its build against this program's. */
  drift: Drift | undefined;
}

async function bridgeFacts(ctx: CliContext, bridge: string) {
  const client = createIncusClient({ ...incusOptions(ctx), timeouts: { requestMs: 3000 } });
  try {
    const cfg = (await client.getNetwork(bridge)).value.config;
    return { gateway: gatewayOf(cfg), dns: dnsBlockGateway(cfg["raw.dnsmasq"] ?? "") };
  } catch {
    return { gateway: undefined, dns: undefined }; // Incus down or no bridge: unknown
  } finally {
    client.close();
  }
}

/** Gathers the facts and classifies them. */
export async function proxyStatus(ctx: CliContext, url: string): Promise<StatusReport> {
  const config = await loadProxyConfig(`${ctx.perm.configDir}/config.yaml`);
  const [read, files, bridge] = await Promise.all([
    readProxyHealth(url),
    readRunFiles(ctx.perm.stateDir),
    bridgeFacts(ctx, config.bridge),
  ]);
  const { state, why } = classifyProxy({
    read,
    dnsManaged: read.kind === "ok" && read.health.dnsManaged !== undefined
      ? read.health.dnsManaged
      : config.dns,
    bridgeGateway: bridge.gateway,
    pinnedGateway: config.gateway,
    dnsBlockGateway: bridge.dns,
  });
  if (read.kind === "down" && files.pid) await removeRunFiles(ctx.perm.stateDir);
  return {
    state,
    why: read.kind === "down" && files.pid
      ? `${why} (removed the pid file of ${files.pid}, which no longer answers)`
      : why,
    pid: read.kind === "ok" ? read.health.pid : files.pid,
    health: read.kind === "ok" ? read.health : undefined,
    drift: read.kind === "ok" ? versionDrift(read.health, ownBuild(ctx)) : undefined,
  };
}

/** `isx proxy status`: prints the report; exits with the state's code. */
export async function status(ctx: CliContext, url: string, json: boolean): Promise<number> {
  const r = await proxyStatus(ctx, url);
  if (json) {
    out(JSON.stringify({
      status: r.state,
      why: r.why || null,
      pid: r.pid ?? null,
      url,
      health: r.health ?? null,
      drift: r.drift ?? null,
    }));
    return PROXY_STATE_EXIT[r.state];
  }
  const h = r.health;
  const head = h
    ? `${r.state} (pid ${r.pid}, version ${h.version ?? "unknown"}, tls ${h.listen?.tls}, ` +
      `forward ${h.listen?.forward}, CA ${h.caFingerprint?.slice(0, 23)}…)`
    : r.state;
  out(r.why ? `${head}: ${r.why}` : head);
  if (h?.missingCredentials?.length) {
    out(
      `no credential yet for: ${h.missingCredentials.join(", ")} ` +
        (h.credentials
          ? "(add them to ~/.config/isx/credentials.yaml: applied within 2 s)"
          : "(add them to ~/.config/isx/credentials.yaml, then isx proxy restart)"),
    );
  }
  for (const line of credentialLines(h?.credentials, Date.now())) out(line);
  if (h?.configDriftedFiles?.length) {
    out(`changed since start: ${h.configDriftedFiles.join(", ")}: isx proxy restart`);
  }
  if (h?.authError) out(`credentials: ${h.authError}`);
  if (r.drift && r.drift.kind !== "none") out(`drift: ${r.drift.detail}`);
  return PROXY_STATE_EXIT[r.state];
}

function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

/** The live reload's and each command source's state, one line each (never a value). */
export function credentialLines(c: ProxyCredentials | undefined, now: number): string[] {
  if (!c) return [];
  const out: string[] = [];
  if (c.error) {
    const since = c.errorSince ? ` (since ${ago(now - c.errorSince)} ago)` : "";
    out.push(`credentials not reloaded${since}, the previous ones stay in force: ${c.error}`);
  }
  for (const s of c.sources ?? []) {
    const parts = [`credential command ${s.program}: ${s.state}`];
    if (s.failingSince) parts.push(`failing since ${ago(now - s.failingSince)} ago`);
    if (s.expiresAt) parts.push(`expires in ${ago(s.expiresAt - now)}`);
    if (s.runs !== undefined) parts.push(`${s.runs} run${s.runs === 1 ? "" : "s"}`);
    out.push(parts.join(", ") + (s.error ? `: ${s.error}` : ""));
  }
  return out;
}
