/**
 * The proxy as `isx proxy` runs it: everything assembled from the user's files. Reads the
 * `proxy:` block of `config.yaml`, the credentials file, the host CA; connects to Incus for
 * the address registry and the bridge's DNS; follows isb's egress secrets; then
 * `startProxy`. `/health` is computed here from those sources (config drift, the bridge's
 * DNS now, the credentials file now); the `proxy:` block itself is `host_config.ts`.
 *
 * @module
 */

import {
  createIncusClient,
  type IncusClient,
  type IncusClientOptions,
  IsbError,
  isNotFound,
  log,
} from "../../rpc/base.ts";
import { memberOnly } from "../callers/member.ts";
import { loadCa } from "../tls/ca.ts";
import { ClientRegistry, incusSource } from "../callers/clients.ts";
import { BridgeGuard, nftBinary } from "../callers/guard.ts";
import { connLimitTable } from "../callers/conn_limit.ts";
import { type CustomRule, loadCredentials, missingNamespaces } from "../config/credentials.ts";
import {
  loadProxyConfig,
  nftTables,
  type ProxyConfig,
  restartOnlyPart,
} from "../config/host_config.ts";
import { CommandSources } from "../config/command_source.ts";
import { watchCredentials } from "../config/reload.ts";
import { applyDns, bridgeGateway, dnsBlockCurrent } from "./dns.ts";
import { ConfigWatch } from "../config/drift.ts";
import { dumpCredentials } from "../config/dump.ts";
import type { HealthStatus } from "./_health.ts";
import { EgressSecrets } from "../egress/secrets.ts";
import { bridgeInfoOf, EgressListeners } from "../egress/serve.ts";
import { type ProxyHandle, startProxy } from "./_start.ts";
import { BridgeFollower, proxyOnlyGateway } from "./_proxy_only.ts";
import { Converger } from "./_converge.ts";
import { Policy } from "../config/policy.ts";
import { dashboardToken, taskReportToken } from "../dashboard/token.ts";
import { InstanceShelf } from "../dashboard/view.ts";
import { type ChildSpec, MCP_HOST } from "../mcp_endpoint/mod.ts";

/** Where `isx proxy` finds things. */
export interface HostPaths {
  /** `~/.config/isx`. */
  configDir: string;
  /** `~/.local/state/isx`. */
  stateDir: string;
  /** `~/.local/state/isb`. */
  isbStateDir: string;
  /** The Incus unix socket. */
  socket: string;
  /** Another incusd (`--remote`) and the member served (`--target`); the socket when absent. */
  incus?: IncusClientOptions;
  /** Where the program runs from (reported by `/health`). */
  programDir?: string;
  /** The build's commit (`ISX_GIT_SHA`, set by the launcher), if known. */
  gitSha?: string | null;
}

/** A proxy started from the user's files. */
export interface HostProxy {
  /** The running listeners. */
  handle: ProxyHandle;
  /** The `proxy:` block in force. */
  config: ProxyConfig;
  /** The address the proxy listens on. */
  gateway: string;
  /** Follows the proxy-only bridge (its gateway is served too while it exists). */
  proxyOnly: BridgeFollower;
  /** Stops everything. */
  close(): Promise<void>;
}

/** Starts the proxy from `config.yaml`, `credentials.yaml`, the CA and Incus. */
export async function startHostProxy(
  paths: HostPaths,
  opts: {
    shutdown?: { token: string; onShutdown: () => void };
    /** Header rules tools declare (`proxy:` in tool YAML, user and search-path layers). */
    toolRules?: CustomRule[];
    /** Serve isx mcp to coordinators at mcp.isx.internal, starting each one's child so. */
    mcp?: ChildSpec;
  } = {},
): Promise<HostProxy> {
  const configPath = `${paths.configDir}/config.yaml`;
  const credsPath = `${paths.configDir}/credentials.yaml`;
  const config = await loadProxyConfig(configPath);
  const creds = await loadCredentials(credsPath);
  const missing = missingNamespaces(creds);
  if (missing.length) {
    log.warn("proxy: no credential yet; their placeholders go upstream unchanged", {
      namespaces: missing.join(","),
      file: credsPath,
    });
  }
  const ca = await loadCa(`${paths.stateDir}/ca`);
  // credentials.yaml and config.yaml's hosts/domains are reloaded live; the rest of
  // config.yaml and the CA (after loadCa, which creates it) only by a restart
  const watch = await ConfigWatch.start([configPath, `${paths.stateDir}/ca/ca.crt`], {
    [configPath]: restartOnlyPart,
  });
  const incus = createIncusClient(paths.incus ?? { socket: paths.socket });
  const cleanup: (() => Promise<void> | void)[] = [() => incus.close()];
  try {
    const gateway = config.gateway ?? await bridgeGateway(incus, config.bridge);
    if (!gateway) {
      throw new IsbError(
        "invalid",
        `start proxy: bridge "${config.bridge}" has no IPv4 address; set proxy.gateway`,
      );
    }
    const policyConfig = (c: ProxyConfig) => ({
      // mcp.isx.internal: a leaf and the bridge's DNS, like an intercepted domain
      domains: opts.mcp ? [...c.domains, MCP_HOST] : c.domains,
      ...(opts.toolRules ? { toolRules: opts.toolRules } : {}),
      ...(c.hosts ? { hosts: c.hosts } : {}),
    });
    const policy = new Policy(creds, policyConfig(config));
    const sources = new CommandSources();
    // tables of this bridge's proxy (and proxy.nft_prefix): another proxy's are left alone
    const tables = nftTables(config.bridge, config.nft_prefix);
    const guard = new BridgeGuard(nftBinary(), tables.guard);
    cleanup.unshift(() => guard.close());
    // on a cluster member (--target), only the instances it runs are callers of this proxy
    const member = paths.incus?.target;
    const shelf = new InstanceShelf();
    const source = incusSource(member ? memberOnly(incus, member) : incus, (l) => shelf.set(l));
    let listError = "no listing yet";
    const registry = new ClientRegistry({
      listInstances: () =>
        source.listInstances().catch((e) => {
          listError = String((e as Error)?.message ?? e);
          throw e;
        }),
      ...(source.events ? { events: source.events.bind(source) } : {}),
    }, {
      now: Date.now,
      onListing: (list) =>
        guard.sync(list.flatMap((i) => i.guard ?? []), list.flatMap((i) => i.ports ?? [])),
    });
    cleanup.unshift(() => registry.close());
    // Every need is retried with backoff until it holds (issue 19); `/health` lists the ones
    // that do not yet (`converging`), and `isx proxy status` is `running` only without any.
    const needs = new Converger();
    // Not awaited: a slow Incus must not keep the proxy from answering; callers wait instead.
    registry.start().catch(() => {});
    void needs.need("registry", async () => {
      await registry.refresh();
      if (registry.known() === undefined) {
        throw new IsbError("connect", `list the instances: ${listError}`);
      }
    });
    void needs.need("guard", async () => {
      await registry.refresh();
      if (!guard.active) {
        throw new IsbError(
          "io",
          `write nft table bridge ${tables.guard}: not written (the listing failed, or nft ` +
            "refused: the proxy needs CAP_NET_ADMIN; see isx proxy logs)",
        );
      }
    });
    const egress = new EgressSecrets({ dir: `${paths.isbStateDir}/egress` });
    await egress.start();
    cleanup.unshift(() => egress.close());
    let dnsConfigured = false;
    if (config.dns) {
      // a clean stop takes the block away, so a leftover block means a proxy that died
      // (`isx proxy status`: stale_dns) rather than one that was stopped; registered before
      // the retries, so they stop first (cleanup runs last-in first)
      cleanup.unshift(() =>
        applyDns(incus, config.bridge, { names: [], gateway }).then(
          () => {},
          (e) =>
            log.warn("proxy: could not remove the bridge DNS block", {
              bridge: config.bridge,
              error: (e as Error).message,
            }),
        )
      );
      // the first attempt is awaited (a restart's PATCH can race the old dnsmasq: retried)
      dnsConfigured = await needs.need("dns", async () => {
        try {
          await applyDns(incus, config.bridge, { names: policy.dnsNames(), gateway });
        } catch (e) {
          throw new IsbError("api", `set the DNS of ${config.bridge}: ${(e as Error).message}`);
        }
      });
    }
    cleanup.unshift(() => needs.close());
    // A change of the files applies within RELOAD_POLL_MS: a new policy generation for new
    // requests (those in flight keep their head), DNS names re-applied when they changed.
    let proxyOnlyServing = (): string | undefined => undefined;
    const reload = await watchCredentials({
      credentialsPath: credsPath,
      configPath,
      policy,
      sources,
      policyConfig,
      onDnsChange: async () => {
        if (!config.dns) return;
        const names = policy.dnsNames();
        // the proxy-only bridge too while it is served (its follower starts later)
        const served = proxyOnlyServing();
        const bridges: [string, string][] = [
          [config.bridge, gateway],
          ...(served ? [[config.proxy_only_bridge, served] as [string, string]] : []),
        ];
        for (const [bridge, at] of bridges) {
          await applyDns(incus, bridge, { names, gateway: at }).catch((e) =>
            log.warn("proxy: could not update the bridge DNS", {
              bridge,
              error: (e as Error).message,
            })
          );
        }
      },
    });
    cleanup.unshift(() => reload.close());
    const status = async (): Promise<HealthStatus> => {
      const drifted = await watch.drifted();
      let authError: string | null = null;
      try {
        await loadCredentials(credsPath);
      } catch (e) {
        authError = (e as Error).message;
      }
      let dns = false;
      if (config.dns) {
        try {
          const raw = (await incus.getNetwork(config.bridge)).value.config["raw.dnsmasq"] ?? "";
          dns = dnsBlockCurrent(raw, { names: policy.dnsNames(), gateway });
        } catch { /* the bridge is gone or Incus is down: not configured */ }
      }
      return {
        gitSha: paths.gitSha || null,
        dnsConfigured: dns,
        dnsManaged: config.dns,
        configDrifted: drifted.length > 0,
        configDriftedFiles: drifted,
        authError,
        missingCredentials: missingNamespaces(policy.credentials),
        programDir: paths.programDir ?? null,
        converging: needs.pending(),
      };
    };
    const handle = await startProxy({
      listen: {
        tls: { hostname: gateway, port: config.ports.tls },
        forward: { hostname: gateway, port: config.ports.forward },
        health: [
          { hostname: gateway, port: config.ports.health },
          ...(gateway === "127.0.0.1"
            ? []
            : [{ hostname: "127.0.0.1", port: config.ports.health }]),
        ],
      },
      policy,
      ca,
      clients: registry,
      egress,
      sources,
      dnsConfigured,
      status,
      reload: () => reload.state(),
      dump: () => ({
        pid: Deno.pid,
        config: { ...config, gateway },
        extra_listens: handle.extraListens(),
        intercepted_domains: policy.domains,
        credentials: dumpCredentials(policy.credentials),
        instances: (registry.known() ?? []).map((r) => r.name).sort(),
      }),
      limits: {
        connectionsPerInstance: config.limits.connections_per_instance,
        headerTimeoutMs: config.limits.header_timeout,
        keepAliveMs: config.limits.keepalive_timeout,
        streamIdleMs: config.limits.stream_idle_timeout,
      },
      ...(opts.shutdown ? { shutdown: opts.shutdown } : {}),
      // the dashboard's tokens derive from the shutdown token: no token, no dashboard
      ...(opts.shutdown
        ? {
          dashboard: {
            token: await dashboardToken(opts.shutdown.token),
            reportToken: await taskReportToken(opts.shutdown.token),
            shelf,
          },
        }
        : {}),
      ...(opts.mcp ? { mcp: { spec: opts.mcp } } : {}),
    });
    cleanup.unshift(() => handle.close());
    // sockets Deno keeps after the proxy dropped them (no ClientHello) still count here
    const limit = connLimitTable(nftBinary(), {
      ports: [config.ports.tls, config.ports.forward],
      perSource: 2 * config.limits.connections_per_instance,
      interfaces: [config.bridge, config.proxy_only_bridge],
    }, tables.connLimit);
    cleanup.unshift(() => limit.remove());
    await needs.need("conn_limit", async () => {
      try {
        await limit.apply();
      } catch (e) {
        throw new IsbError(
          "io",
          `write nft table inet ${tables.connLimit}: ${(e as Error).message} (the proxy needs ` +
            "CAP_NET_ADMIN)",
        );
      }
    });
    // the retries stop before the table is removed (cleanup runs last-in first)
    cleanup.unshift(() => needs.close());
    const listeners = new EgressListeners({
      clients: registry,
      counter: handle.counter,
      dir: `${paths.isbStateDir}/egress`,
      bridgeInfo: async (bridge) => bridgeInfoOf((await incus.getNetwork(bridge)).value.config),
    });
    cleanup.unshift(() => listeners.close());
    egress.watch((entries) => void listeners.sync(entries));
    const proxyOnly = followProxyOnly(incus, handle, config, () => policy.dnsNames());
    proxyOnlyServing = () => proxyOnly.serving;
    cleanup.unshift(() => proxyOnly.close());
    await proxyOnly.start();
    log.info("proxy: listening", {
      ...(await handle.health()).listen,
      domains: policy.domains.join(","),
    });
    return {
      handle,
      config,
      gateway,
      proxyOnly,
      async close() {
        for (const f of cleanup) await f();
      },
    };
  } catch (e) {
    for (const f of cleanup) await f();
    throw e;
  }
}

/** The follower that serves the proxy-only bridge's gateway (listeners and DNS). */
function followProxyOnly(
  incus: IncusClient,
  handle: ProxyHandle,
  config: ProxyConfig,
  dnsNames: () => readonly string[],
): BridgeFollower {
  const bridge = config.proxy_only_bridge;
  return new BridgeFollower({
    async read() {
      try {
        return proxyOnlyGateway((await incus.getNetwork(bridge)).value.config);
      } catch (e) {
        if (isNotFound(e)) return undefined;
        throw e;
      }
    },
    async serve(gateway) {
      const at = { hostname: gateway, tls: config.ports.tls, forward: config.ports.forward };
      const addrs = await handle.addListen(at);
      if (config.dns) {
        await applyDns(incus, bridge, { names: dnsNames(), gateway }).catch((e) =>
          log.warn("proxy: could not set the DNS of the proxy-only bridge", {
            bridge,
            error: (e as Error).message,
          })
        );
      }
      log.info("proxy: serving the proxy-only bridge", {
        bridge,
        tls: `${gateway}:${addrs.tls.port}`,
        forward: `${gateway}:${addrs.forward.port}`,
      });
    },
    unserve: (gateway) => handle.removeListen(gateway),
    async *changes(signal) {
      const stream = await incus.events({ types: ["lifecycle"], allProjects: true });
      const stop = () => stream.close();
      signal.addEventListener("abort", stop, { once: true });
      try {
        for await (const ev of stream) {
          const action = String((ev.metadata as { action?: unknown } | undefined)?.action ?? "");
          if (action.startsWith("network-")) yield ev;
        }
      } finally {
        signal.removeEventListener("abort", stop);
        stream.close();
      }
    },
  });
}
