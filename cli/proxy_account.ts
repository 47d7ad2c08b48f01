/**
 * `isx proxy account list|set|unset`: which proxy account each instance uses, per
 * namespace (`claude`, `openai`, `github`). Pins are instance stamps the proxy reads; this
 * command never reads credentials.yaml (only the proxy does), so a pin naming a missing
 * account is accepted here and refused by the proxy with 502 on the instance's next call.
 *
 * @module
 */

import { listAccountPins, SLOW_DAEMON_MS, updateAccountPins } from "../mcp/mod.ts";
import {
  ACCOUNT_KEYS,
  type AccountCatalogue,
  canonicalKey,
  catalogueAccounts,
  loadProxyConfig,
  type Namespace,
  parseAccountPairs,
  resolveAccount,
} from "../proxy/mod.ts";
import { createIncusClient, type IncusClient } from "../rpc/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext } from "./command.ts";
import { ACCOUNT_HELP } from "./proxy_help.ts";
import { getJson, out } from "./proxy_view.ts";
import { incusOptions } from "./incus_remote.ts";

function withClient<T>(ctx: CliContext, fn: (c: IncusClient) => Promise<T>): Promise<T> {
  const client = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  return fn(client).finally(() => client.close());
}

/** Names come from stamps anyone with Incus access can write: no terminal escapes. */
function flat(s: string): string {
  // deno-lint-ignore no-control-regex
  return s.replace(/[\x00-\x1f\x7f]/g, "?");
}

function pairs(m: Record<string, string>): string {
  const s = Object.entries(m).map(([k, v]) => `${k}=${v}`).join(",");
  return s === "" ? "-" : flat(s);
}

/** What the proxy resolves one namespace to: an account, a refusal, or none configured. */
export type Resolution =
  | { account: string; kind: string; source: string }
  | { error: string }
  | null;

/** The running proxy's account catalogue (`GET /accounts`), if it answers. */
async function proxyCatalogue(
  ctx: CliContext,
  url: string | undefined,
): Promise<AccountCatalogue | undefined> {
  const base = url?.replace(/\/$/, "") ??
    `http://127.0.0.1:${(await loadProxyConfig(`${ctx.perm.configDir}/config.yaml`)).ports.health}`;
  const got = await getJson(`${base}/accounts`);
  return got?.status === 200 ? got.body as AccountCatalogue : undefined;
}

/** The proxy's decision per namespace (`claude`, `openai`, `github`) for these choices. */
export function resolvedFor(
  catalogue: AccountCatalogue,
  pins: Record<string, string>,
  template: Record<string, string>,
): Record<string, Resolution> {
  const out: Record<string, Resolution> = {};
  const names: [string, Namespace][] = [
    ["claude", "anthropic"],
    ["openai", "openai"],
    ["github", "github"],
  ];
  for (const [key, ns] of names) {
    const entry = catalogue[ns];
    if (!entry) continue;
    const r = resolveAccount(ns, catalogueAccounts(entry), { pins, template });
    out[key] = r.error !== undefined
      ? { error: r.error }
      : r.account === undefined
      ? null
      : { account: r.name, kind: r.account.kind, source: r.source };
  }
  return out;
}

/** Runs `isx proxy account …` (`rest` starts after `account`). */
export async function accountCommand(rest: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs(rest, {
    json: { type: "boolean" },
    url: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(ACCOUNT_HELP);
    return 0;
  }
  const [sub, instance, ...args] = positionals;
  if (sub === "list" || sub === undefined) {
    if (instance !== undefined) throw new UsageError("account list takes no arguments");
    const rows = await withClient(ctx, listAccountPins);
    const catalogue = await proxyCatalogue(ctx, values.url);
    const full = rows.map((r) => ({
      ...r,
      resolved: catalogue ? resolvedFor(catalogue, r.pins, r.template_accounts) : null,
    }));
    if (values.json) out(JSON.stringify(full));
    else {
      const shown = (r: (typeof full)[number]) =>
        r.resolved === null
          ? "? (proxy not answering)"
          : Object.entries(r.resolved).map(([ns, v]: [string, Resolution]) =>
            v === null ? `${ns}=-` : "error" in v ? `${ns}=REFUSED` : `${ns}=${v.account}`
          ).join(",");
      const lines = [["INSTANCE", "TEMPLATE", "PINS", "TEMPLATE ACCOUNTS", "PROXY USES"]].concat(
        full.map((r) => [
          r.instance,
          r.template ?? "-",
          pairs(r.pins),
          pairs(r.template_accounts),
          flat(shown(r)),
        ]),
      );
      const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
      out(lines.map((l) => l.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n"));
      for (const r of full) {
        for (const [ns, v] of Object.entries<Resolution>(r.resolved ?? {})) {
          if (v && "error" in v) out(flat(`${r.instance}: ${ns}: ${v.error}`));
        }
      }
    }
    return 0;
  }
  if (sub !== "set" && sub !== "unset") {
    throw new UsageError(`unknown account subcommand "${sub}" (list, set, unset)`);
  }
  if (instance === undefined || args.length === 0) {
    throw new UsageError(
      sub === "set"
        ? "usage: isx proxy account set <instance> NS=NAME ..."
        : "usage: isx proxy account unset <instance> NS ...",
    );
  }
  let changes: Record<string, string | null>;
  try {
    if (sub === "set") changes = parseAccountPairs(args);
    else {
      changes = {};
      for (const ns of args) {
        if (!ACCOUNT_KEYS.includes(ns)) {
          throw new TypeError(`namespace "${ns}": one of ${ACCOUNT_KEYS.join(", ")}`);
        }
        changes[canonicalKey(ns)] = null;
      }
    }
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const after = await withClient(ctx, (c) => updateAccountPins(c, instance, changes));
  if (values.json) out(JSON.stringify({ instance, pins: after }));
  else out(`${instance}: pins ${pairs(after)}`);
  return 0;
}
