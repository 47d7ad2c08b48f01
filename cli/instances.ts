/**
 * `isx branch|start|stop|destroy` (`list` in list.ts, `shell` in shell.ts): instances of built
 * templates. `branch` and `start` run the preflight first (the proxy answers, runs this
 * build and config, holds the credentials the template's agents need) and repair the
 * guest's trust store when the proxy signs with another CA than the one it trusts.
 *
 * @module
 */

import {
  beginAddressListing,
  branchDefaults,
  branchInstance,
  claimMember,
  destroyIsxInstance,
  listAddresses,
  MCP_CALLER_STAMP,
  NAME_RE,
  type NetworkMode,
  newGrant,
  placeFingerprint,
  type ProxyHealth,
  proxyHealthUrl,
  readHostConfig,
  readProxyHealth,
  readStamps,
  reconcileMcpClients,
  STAMP,
  stampGrant,
  startIsxInstance,
  stopIsxInstance,
} from "../mcp/instances/commands.ts";
import { parseAccountPairs } from "../proxy/config/accounts.ts";
import { loadProxyConfig } from "../proxy/config/host_config.ts";
import type { IncusClient } from "../rpc/base.ts";
import { parseCommandArgs, UsageError } from "./args.ts";
import type { CliContext, Command } from "./command.ts";
import { checkProxy, note, repairCa } from "./instance_checks.ts";
import { withClient } from "./instances_client.ts";
import { importModule } from "./commands.ts";

function out(line: string): void {
  // deno-lint-ignore no-console
  console.log(line);
}

function names(positionals: string[], min = 1): string[] {
  if (positionals.length < min) throw new UsageError("name an instance");
  for (const n of positionals) {
    if (!NAME_RE.test(n)) throw new UsageError(`"${n}" is not an instance name`);
  }
  return positionals;
}

const NETWORKS = ["full", "proxy-only", "airgap"];

/** `claude registered, opencode absent, …` for a registration report. */
function registrationText(r: Record<string, string>): string {
  return Object.entries(r).map(([agent, what]) => `${agent} ${what}`).join(", ") || "none";
}

function randomTag(): string {
  const chars = "abcdefghijkmnpqrstuvwxyz23456789";
  return [...crypto.getRandomValues(new Uint8Array(5))].map((b) => chars[b % 32]).join("");
}

/** `isx branch`. */
export const branchCommand: Command = {
  name: "branch",
  progs: ["isx"],
  summary: "make a running copy-on-write instance of a built template",
  help: `Usage: isx branch [<name>] --from <template> [--network full|proxy-only|airgap]
                  [--account NS=NAME ...] [--mcp-client] [--cold] [--json] [--no-preflight]

Copies a built template (copy-on-write), starts it with a fresh instance secret and
waits for its address.

Without <name>, a ready member of the template's warm pool (isx pool) is claimed
instead when there is one: it is already started, so this takes a fraction of a copy.
Its name is the member's (pool-<template>-<tag>; Incus cannot rename a running
instance). No member ready, --cold, --mcp-client, or --network other than the template's: a copy
named <template>-<tag>. With <name>, always a copy.

Preflight: it refuses (exit 7, nothing made) when the proxy is not running (isx proxy
start), runs another build or a config changed since it started (isx proxy restart), or
lacks a credential an agent of the template needs (the credentials.yaml block to add).
When the template trusts another proxy CA than the one the proxy serves (built under
another isx home, or before the CA was renewed), the new instance's trust store is
repaired; the template keeps its CA until rebuilt (isx list marks it).

The network mode and resource limits come from the template's definition unless
--network is given:
  full        the bridge, like any instance
  proxy-only  on isx's proxy-only bridge (isxproxy0, made when missing): only the
              isx proxy (443, 3128) and DNS on its gateway, nothing else
  airgap      no network device at all

Options:
  --from TEMPLATE   the built template to copy (required)
  --network MODE    override the template's network mode
  --account NS=NAME pin the proxy account of a namespace (claude, openai, github; may
                    repeat); see isx proxy account --help
  --mcp-client      make it a coordinator: the agent inside may drive isx mcp over
                    https://mcp.isx.internal/mcp through the proxy (stamp mcp-caller;
                    a copy of it never is one); see docs/mcp.md
  --cold            copy even when a warm-pool member is ready
  --json            print the result as JSON
  --no-preflight    skip the refusals (the CA repair still runs when the proxy answers)`,
  mode: () => "instances",
  run(rest, ctx) {
    const { values, positionals } = parseCommandArgs(rest, {
      from: { type: "string" },
      network: { type: "string" },
      account: { type: "string", multiple: true },
      json: { type: "boolean" },
      "mcp-client": { type: "boolean" },
      cold: { type: "boolean" },
      "no-preflight": { type: "boolean" },
    });
    let accounts: Record<string, string> = {};
    try {
      accounts = parseAccountPairs(values.account ?? []);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const [given] = names(positionals, 0);
    if (positionals.length > 1) throw new UsageError("branch makes one instance");
    if (!values.from) throw new UsageError("--from <template> is required");
    if (values.network !== undefined && !NETWORKS.includes(values.network)) {
      throw new UsageError(`--network must be one of ${NETWORKS.join(", ")}`);
    }
    // ms since the process's start (Deno's time origin): start-up, module loading included
    const startup = performance.now();
    return withClient(ctx, async (client) => {
      // each step's milliseconds, with branchInstance's own (`--json` prints them; the bench)
      const steps: Record<string, number> = {};
      let lapAt = performance.now();
      const lap = (step: string) => {
        const now = performance.now();
        steps[step] = Math.round((now - lapAt) * 10) / 10;
        lapAt = now;
      };
      const { configDir, cwd, home } = ctx.perm;
      const host = readHostConfig(configDir, home);
      // started before the definitions load, none depending on them: the proxy's /health,
      // the template (its CA stamp, its NIC) and the address plan's listing of that NIC's
      // network (used when the instance's NIC is on it; branchInstance lists again if not)
      const read = readProxyHealth(proxyHealthUrl(host));
      const sourceRead = client.getInstance(values.from!).then((t) => t.value, () => undefined);
      // what of the listing needs no network (every project's NICs, the projects) goes with it
      const listing = beginAddressListing(client);
      const addresses = sourceRead.then((t) => {
        const nic = t?.expanded_devices?.eth0 ?? t?.devices.eth0;
        return nic?.type === "nic" && nic.network
          ? listAddresses(client, nic.network, listing)
          : undefined;
      });
      addresses.catch(() => {});
      const proxy = await loadProxyConfig(`${configDir}/config.yaml`);
      lap("config");
      // the schemas (zod) load while those are on their way (a computed specifier, as the
      // commands: a static import would load them before the first request is sent)
      const { loadDefinitions } = await importModule<typeof import("../mcp/templates/load.ts")>(
        "../mcp/templates/load.ts",
      );
      lap("definitions: modules");
      const defs = loadDefinitions({
        configDir,
        searchPaths: host.searchPaths,
        cwd,
        home,
        protectedPaths: [ctx.perm.stateDir, ctx.perm.isbStateDir],
      });
      const d = branchDefaults(defs, values.from!);
      lap("definitions: read");
      const [health, source] = await Promise.all([
        checkProxy(ctx, {
          action: `branch "${given ?? "(unnamed)"}" from "${values.from}"`,
          template: values.from!,
          defs,
          skip: values["no-preflight"] === true,
          read,
        }),
        sourceRead,
      ]);
      lap("preflight+template");
      const trusted = readStamps(source?.config ?? {})[STAMP.caFingerprint];
      let repaired = false;
      let caMs = 0;
      const place = {
        bridge: proxy.bridge,
        proxyOnlyBridge: proxy.proxy_only_bridge,
        subnets: proxy.proxy_only_subnets,
        ports: { tls: proxy.ports.tls, forward: proxy.ports.forward },
      };
      const network = (values.network as NetworkMode | undefined) ?? d.network ?? "full";
      if (
        !given && !values.cold && !values["mcp-client"] && network === (d.network ?? "full")
      ) {
        // (a coordinator is granted at its copy: the pool never makes one)
        // a warm-pool member (mcp/pool/), when one is ready and fresh: one ETag-guarded update
        const t0 = Date.now();
        const c = await claimMember(client, {
          template: values.from!,
          present: {
            buildId: readStamps(source?.config ?? {})[STAMP.buildId],
            servedCa: health?.caFingerprint,
            place: placeFingerprint(place, d),
          },
          stamps: Object.fromEntries(
            Object.entries(accounts).map(([ns, n]) => [STAMP.account + ns, n]),
          ),
          now: t0,
        });
        if (c) {
          const r = {
            name: c.name,
            template: values.from!,
            network,
            workdir: c.workdir,
            ...(c.ip ? { ip: c.ip } : {}),
            ms: Date.now() - t0,
            pool: true,
          };
          if (values.json) out(JSON.stringify(r));
          else {
            out(
              `${r.name}: claimed from the warm pool of ${r.template} in ${
                (r.ms / 1000).toFixed(2)
              } s, ${r.ip ?? "no address"} (network ${r.network}); isx shell ${r.name}`,
            );
          }
          return 0;
        }
      }
      const name = given ?? `${values.from!.replace(/^tpl-/, "")}-${randomTag()}`;
      const r = await branchInstance(client, {
        name,
        template: values.from!,
        proxy: place,
        network,
        ...(d.limits ? { limits: d.limits } : {}),
        accounts,
        stamps: {
          ...(trusted ? { [STAMP.caFingerprint]: trusted } : {}),
          // only the person grants it, here or with isx start --mcp-client (issue 20)
          ...(values["mcp-client"] ? { [MCP_CALLER_STAMP]: newGrant() } : {}),
        },
        // read once (a missing template is reported by branchInstance's own read)
        ...(source ? { source } : {}),
        addresses,
        // the CA check needs the started instance, not its secret or address
        alongside: async (n) => {
          const t = performance.now();
          repaired = await repairCa(ctx, client, n, health, trusted);
          caMs = Math.round((performance.now() - t) * 10) / 10;
        },
      });
      // the CA check's own cost, inside ipv4 (overlapped, not added)
      Object.assign(steps, r.steps, { "ca check (overlapped)": caMs });
      if (repaired) {
        note(`isx: ${values.from} still trusts its build-time CA: isx build ${values.from}`);
      }
      const elapsed = Math.round((performance.now() - startup) * 10) / 10;
      if (values.json) {
        out(JSON.stringify({ ...r, steps, startup: Math.round(startup * 10) / 10, elapsed }));
      } else {
        out(
          `${r.name}: branched from ${r.template} in ${(r.ms / 1000).toFixed(2)} s, ` +
            `${r.ip ?? "no address"} (network ${r.network}); isx shell ${r.name}`,
        );
        if (r.mcpClients) note(`isx: coordinator agents: ${registrationText(r.mcpClients)}`);
      }
      return 0;
    });
  },
};

type Act = (
  c: IncusClient,
  n: string,
  o: { force: boolean; ctx: CliContext; health: ProxyHealth | undefined; mcpClient: boolean },
) => Promise<string>;

function lifecycle(
  name: "start" | "stop" | "destroy",
  summary: string,
  help: string,
  act: Act,
  checked = false,
): Command {
  const flags = checked
    ? "\n  --no-preflight   skip the refusals (the CA repair still runs when the proxy answers)" +
      "\n  --mcp-client     make it a coordinator first (stamp mcp-caller; kept when it has one)"
    : "";
  return {
    name,
    progs: ["isx"],
    summary,
    help:
      `Usage: isx ${name} [--force]${
        checked ? " [--no-preflight] [--mcp-client]" : ""
      } <name>...\n\n${help}` +
      `\n\nOptions:\n  --force          also act on instances isx did not make${flags}`,
    mode: () => "instances",
    run(rest, ctx) {
      const { values, positionals } = parseCommandArgs(rest, {
        force: { type: "boolean" },
        ...(checked
          ? {
            "no-preflight": { type: "boolean" as const },
            "mcp-client": { type: "boolean" as const },
          }
          : {}),
      });
      const list = names(positionals);
      return withClient(ctx, async (client) => {
        const health = checked
          ? await checkProxy(ctx, {
            action: `${name} ${list.join(" ")}`,
            skip: values["no-preflight"] === true,
          })
          : undefined;
        for (const n of list) {
          const mcpClient = (values as { "mcp-client"?: boolean })["mcp-client"] === true;
          out(await act(client, n, { force: values.force ?? false, ctx, health, mcpClient }));
        }
        return 0;
      });
    },
  };
}

/** `isx start`. */
export const startCommand = lifecycle(
  "start",
  "start instances (each start gets a fresh instance secret)",
  "Starts instances; every start writes a fresh random secret to /run/isx/instance-secret\n" +
    "(readable by agentuser only) and records its hash on the instance. Like isx branch,\n" +
    "it first refuses when the proxy is down or stale (exit 7, naming the fix), and repairs\n" +
    "the guest's trust store when the proxy now signs with another CA.",
  async (c, n, { force, ctx, health, mcpClient }) => {
    // only the person grants it; kept across starts (the session is the instance)
    if (mcpClient) await stampGrant(c, n);
    // the CA check alongside the address wait, from the stamp read before the start
    const r = await startIsxInstance(c, n, {
      force,
      alongside: (inst) =>
        repairCa(ctx, c, n, health, readStamps(inst.config)[STAMP.caFingerprint]),
    });
    // a running instance made a coordinator now: its agents learn the endpoint at once
    if (mcpClient && r.alreadyRunning) {
      note(`isx: coordinator agents: ${registrationText(await reconcileMcpClients(c, n, true))}`);
    }
    return `${n}: ${r.alreadyRunning ? "already running" : "started"}${r.ip ? ` at ${r.ip}` : ""}`;
  },
  true,
);

/** `isx stop`. */
export const stopCommand = lifecycle(
  "stop",
  "stop instances",
  "Stops instances cleanly (forcibly after 15 s).",
  async (c, n, { force }) =>
    `${n}: ${(await stopIsxInstance(c, n, { force })) ? "stopped" : "already stopped"}`,
);

/** `isx destroy`. */
export const destroyCommand = lifecycle(
  "destroy",
  "delete instances (or templates, or failed builds)",
  "Deletes instances, stopping them first. Works on templates and kept failed builds too.",
  async (c, n, { force }) => {
    await destroyIsxInstance(c, n, { force });
    return `${n}: destroyed`;
  },
);

/** Every instance command of this module, in help order (`isx shell` is cli/shell.ts's). */
export const INSTANCE_COMMANDS: readonly Command[] = [
  branchCommand,
  startCommand,
  stopCommand,
  destroyCommand,
];
