/**
 * `isx proxy account list|set|unset`: which proxy account each instance uses, per
 * namespace (`claude`, `openai`, `github`). Pins are instance stamps the proxy reads; this
 * command never reads credentials.yaml (only the proxy does), so a pin naming a missing
 * account is accepted here and refused by the proxy with 502 on the instance's next call.
 * Also {@link toolRules}: the tools' `proxy:` rules, read for `isx proxy run`.
 *
 * @module
 */

import {
  listAccountPins,
  loadToolProxyRules,
  readHostConfig,
  SLOW_DAEMON_MS,
  updateAccountPins,
} from "../mcp/mod.ts";
import {
  ACCOUNT_KEYS,
  canonicalKey,
  type CustomRule,
  parseAccountPairs,
  Secret,
} from "../proxy/mod.ts";
import { createIncusClient, type IncusClient, log } from "../rpc/mod.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext } from "./command.ts";
import { out } from "./proxy_view.ts";
import { incusOptions } from "./incus_remote.ts";

/** The `--help` of `isx proxy account`. */
export const ACCOUNT_HELP = `Usage: isx proxy account list [--json]
       isx proxy account set <instance> NS=NAME [NS=NAME ...]
       isx proxy account unset <instance> NS [NS ...]

Which credentials.yaml account an instance's requests use, per namespace: claude (or
anthropic), openai (or codex), github. The proxy resolves: the instance's pin, else its
template's accounts:, else the namespace default (default:, else Vertex > OAuth > API key
for claude, else the first account). A pin naming a missing account, or a claude account
of another auth mode than the instance was built for, makes the proxy answer 502: it
never falls back to another account. Pins can also be set with isx branch --account.

  list    every instance's pins and template accounts (--json: an array of objects)
  set     pin accounts (replaces the namespace's pin)
  unset   remove pins (the template's or default account applies again)`;

function withClient<T>(ctx: CliContext, fn: (c: IncusClient) => Promise<T>): Promise<T> {
  const client = createIncusClient({
    ...incusOptions(ctx),
    project: ctx.global.project ?? "",
    timeouts: { requestMs: SLOW_DAEMON_MS },
  });
  return fn(client).finally(() => client.close());
}

function pairs(m: Record<string, string>): string {
  const s = Object.entries(m).map(([k, v]) => `${k}=${v}`).join(",");
  // Names come from stamps anyone with Incus access can write: no terminal escapes.
  // deno-lint-ignore no-control-regex
  return s === "" ? "-" : s.replace(/[\x00-\x1f\x7f]/g, "?");
}

/** Runs `isx proxy account …` (`rest` starts after `account`). */
export async function accountCommand(rest: string[], ctx: CliContext): Promise<number> {
  const { values, positionals } = parseCommandArgs(rest, {
    json: { type: "boolean" },
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
    if (values.json) out(JSON.stringify(rows));
    else {
      const lines = [["INSTANCE", "TEMPLATE", "PINS", "TEMPLATE ACCOUNTS"]].concat(
        rows.map((r) => [r.instance, r.template ?? "-", pairs(r.pins), pairs(r.template_accounts)]),
      );
      const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
      out(lines.map((l) => l.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n"));
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

/**
 * The `proxy:` rules of the user's and search paths' tools, values wrapped as secrets at
 * once. A tool file that cannot be read or is invalid is logged and its rules left out:
 * the proxy still starts, and those domains get no credentials (nothing leaks).
 */
export function toolRules(ctx: CliContext): CustomRule[] {
  const { configDir, home } = ctx.perm;
  try {
    const searchPaths = readHostConfig(configDir, home).searchPaths;
    return loadToolProxyRules({ configDir, searchPaths }).map((r): CustomRule => {
      const value = new Secret(r.value);
      if (r.kind === "header") return { domain: r.domain, kind: "header", header: r.header, value };
      if (r.kind === "basic") return { domain: r.domain, kind: "basic", user: r.user, value };
      return { domain: r.domain, kind: "bearer", value };
    });
  } catch (e) {
    log.warn("proxy: tools' proxy rules not loaded", { error: (e as Error).message });
    return [];
  }
}
