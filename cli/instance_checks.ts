/**
 * The CLI side of the preflight and CA repair shared by `isx branch`, `isx start` and
 * `isx shell` (mcp/instances/preflight.ts, ca_trust.ts): this program's build, the proxy's
 * ops address from config.yaml, and the lines people see (warnings on stderr, so `--json`
 * output stays one document).
 *
 * @module
 */

import {
  credentialNeeds,
  type HealthRead,
  judgePreflight,
  needsCaRepair,
  type OwnBuild,
  pemFingerprint,
  preflight,
  type ProxyHealth,
  proxyHealthUrl,
  readHostConfig,
  readProxyHealth,
  readServedCa,
  repairGuestCa,
} from "../mcp/instances/commands.ts";
import type { Definitions } from "../mcp/templates/load.ts";
import { type IncusClient, IsbError, VERSION } from "../rpc/base.ts";
import type { CliContext } from "./command.ts";

/** Prints a note for people on stderr. */
export function note(line: string): void {
  // deno-lint-ignore no-console
  console.error(line);
}

/** This program's build, as the launcher described it. */
export function ownBuild(ctx: CliContext): OwnBuild {
  return {
    version: VERSION,
    gitSha: ctx.env.ISX_GIT_SHA || null,
    programDir: ctx.perm.programDir,
  };
}

/** Options of {@link checkProxy}. */
export interface CheckOptions {
  /** What the command does, for messages. */
  action: string;
  /** The template whose tools need credentials (branch), if any. */
  template?: string;
  /** The loaded definitions (for the template's tools). */
  defs?: Definitions;
  /** `--no-preflight`: read the proxy for the CA repair, refuse nothing. */
  skip?: boolean;
  /** The `/health` read, when the caller started it early (branch: before its definitions). */
  read?: Promise<HealthRead>;
}

/** Runs the preflight (or, skipped, just reads `/health`); the proxy's health if it answers. */
export async function checkProxy(
  ctx: CliContext,
  opts: CheckOptions,
): Promise<ProxyHealth | undefined> {
  const url = proxyHealthUrl(readHostConfig(ctx.perm.configDir, ctx.perm.home));
  const read = await (opts.read ?? readProxyHealth(url));
  if (opts.skip) return read.kind === "ok" ? read.health : undefined;
  const needs = opts.template && opts.defs ? credentialNeeds(opts.defs, opts.template) : [];
  const r = judgePreflight(read, {
    healthUrl: url,
    own: ownBuild(ctx),
    action: opts.action,
    needs,
  });
  for (const w of r.warnings) note(`isx: warning: ${w}`);
  return r.health;
}

/**
 * The check before `isx build` (spec §7.H): a build does not need the proxy, so it only
 * warns when the instances it leads to would find the proxy down or stale.
 */
export async function warnProxy(ctx: CliContext): Promise<void> {
  const url = proxyHealthUrl(readHostConfig(ctx.perm.configDir, ctx.perm.home));
  try {
    await preflight({ healthUrl: url, own: ownBuild(ctx), action: "isx build" });
  } catch (e) {
    if (!(e instanceof IsbError)) throw e;
    const fix = (e.data as { fix?: string } | undefined)?.fix;
    note(`isx: warning: the proxy is not ready for instances (${fix ?? e.message})`);
  }
}

/**
 * Repairs a running instance's trust store when the proxy serves another CA than the one
 * it trusts (`trusted`); returns whether it did. Nothing to compare without a proxy.
 */
export async function repairCa(
  ctx: CliContext,
  client: IncusClient,
  name: string,
  health: ProxyHealth | undefined,
  trusted: string | undefined,
): Promise<boolean> {
  if (!health || !needsCaRepair(trusted, health.caFingerprint)) return false;
  const url = proxyHealthUrl(readHostConfig(ctx.perm.configDir, ctx.perm.home));
  const pem = await readServedCa(url);
  if (!pem || (await pemFingerprint(pem)) !== health.caFingerprint) {
    throw new IsbError(
      "not_ready",
      `repair the proxy CA of "${name}": the proxy at ${url} did not serve its CA: isx proxy restart`,
    );
  }
  await repairGuestCa(client, name, { pem, fingerprint: health.caFingerprint });
  note(
    `isx: ${name}: it trusted ${
      trusted ? "another proxy CA" : "an unrecorded proxy CA"
    }; its trust store now holds the one the proxy serves`,
  );
  return true;
}
