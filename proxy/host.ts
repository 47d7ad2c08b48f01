/**
 * The proxy as `isx proxy` runs it: everything assembled from the user's files. Reads the
 * `proxy:` block of `config.yaml`, the credentials file, the host CA; connects to Incus for
 * the address registry and the bridge's DNS; follows isb's egress secrets; then
 * `startProxy`. Also the defaults every `isx proxy` subcommand agrees on (ports,
 * bridge, where the health port is).
 *
 * ```yaml
 * proxy:
 *   bridge: incusbr0          # whose gateway the proxy listens on
 *   proxy_only_bridge: isxproxy0     # also served when it exists (isx branch --network proxy-only)
 *   proxy_only_subnets: 10.78.0.0/16 # where isx branch picks that bridge's /24
 *   gateway: 10.77.0.1        # default: the bridge's ipv4.address
 *   ports: { tls: 443, forward: 3128, health: 18080 }
 *   dns: true                 # keep the bridge's raw.dnsmasq block up to date
 *   domains: [registry.npmjs.org]
 *   hosts: { anthropic: [api.anthropic.com] }
 *   limits: { connections_per_instance: 256, header_timeout: 30s, keepalive_timeout: 2m,
 *             stream_idle_timeout: 15m }
 * ```
 *
 * @module
 */

import { load } from "js-yaml";
import { z } from "zod";
import {
  createIncusClient,
  type IncusClient,
  IsbError,
  isNotFound,
  log,
  parseDuration,
} from "../rpc/mod.ts";
import { loadCa } from "./ca.ts";
import { ClientRegistry, incusSource } from "./clients.ts";
import { BridgeGuard, nftBinary } from "./guard.ts";
import { type CustomRule, loadCredentials } from "./credentials.ts";
import { applyDns, bridgeGateway } from "./dns.ts";
import { EgressSecrets } from "./egress.ts";
import { bridgeInfoOf, EgressListeners } from "./egress_serve.ts";
import { type ProxyHandle, startProxy } from "./start.ts";
import { BridgeFollower, proxyOnlyGateway } from "./proxy_only.ts";
import { Policy } from "./policy.ts";

/** The proxy-only bridge's default name (isx branch --network proxy-only makes it). */
export const PROXY_ONLY_BRIDGE = "isxproxy0";

/** The default ports (team contract). */
export const DEFAULT_PORTS = { tls: 443, forward: 3128, health: 18080 } as const;

/** A duration (`30s`, `2m`, or seconds as a number) in milliseconds, at least 1 ms. */
const Duration = z.union([z.string(), z.number()]).transform((v, ctx) => {
  try {
    const ms = parseDuration(v);
    if (ms >= 1) return ms;
  } catch { /* reported below */ }
  ctx.addIssue({ code: "custom", message: `"${v}" is not a duration like 30s, 2m or 90` });
  return z.NEVER;
});

const Limits = z.strictObject({
  connections_per_instance: z.number().int().min(1).max(65535).default(256),
  header_timeout: Duration.default(30_000),
  keepalive_timeout: Duration.default(120_000),
  stream_idle_timeout: Duration.default(900_000),
});

const ProxyBlock = z.strictObject({
  bridge: z.string().min(1).default("incusbr0"),
  proxy_only_bridge: z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/).default(PROXY_ONLY_BRIDGE),
  proxy_only_subnets: z.string().regex(/^\d{1,3}\.\d{1,3}\.0\.0\/16$/).default(
    "10.78.0.0/16",
  ),
  gateway: z.string().min(1).optional(),
  ports: z.strictObject({
    tls: z.number().int().min(0).max(65535).default(DEFAULT_PORTS.tls),
    forward: z.number().int().min(0).max(65535).default(DEFAULT_PORTS.forward),
    health: z.number().int().min(0).max(65535).default(DEFAULT_PORTS.health),
  }).prefault({}),
  dns: z.boolean().default(true),
  domains: z.array(z.string().min(1)).default([]),
  hosts: z.strictObject({
    anthropic: z.array(z.string().min(1)).optional(),
    openai: z.array(z.string().min(1)).optional(),
    github: z.array(z.string().min(1)).optional(),
  }).optional(),
  limits: Limits.prefault({}),
});

/** The `proxy:` block with defaults applied. */
export interface ProxyConfig {
  /** The bridge whose gateway the proxy listens on. */
  bridge: string;
  /** isx's proxy-only bridge, served too once it exists (marked `user.isx.role`). */
  proxy_only_bridge: string;
  /** The `/16` that bridge's `/24` is picked from. */
  proxy_only_subnets: string;
  /** The listen address; default: the bridge's `ipv4.address`. */
  gateway?: string | undefined;
  /** TLS interception, forward proxy and ops ports. */
  ports: { tls: number; forward: number; health: number };
  /** Whether to keep the bridge's `raw.dnsmasq` block up to date. */
  dns: boolean;
  /** More intercepted domains. */
  domains: string[];
  /** Replacement hosts per provider namespace. */
  hosts?: {
    anthropic?: string[] | undefined;
    openai?: string[] | undefined;
    github?: string[] | undefined;
  } | undefined;
  /** Per-instance connection cap and timeouts (milliseconds once parsed). */
  limits: {
    connections_per_instance: number;
    header_timeout: number;
    keepalive_timeout: number;
    stream_idle_timeout: number;
  };
}

/** Parses `config.yaml` text and returns its `proxy:` block (other blocks are not ours). */
export function parseProxyConfig(text: string): ProxyConfig {
  let doc: unknown = null;
  try {
    if (text.trim()) doc = load(text);
  } catch (e) {
    throw new IsbError("parse", `read config: ${(e as Error).message.split("\n")[0]}`);
  }
  const block =
    (doc && typeof doc === "object" ? (doc as Record<string, unknown>).proxy : undefined) ?? {};
  const r = ProxyBlock.safeParse(block);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new IsbError(
      "invalid",
      `read config: proxy.${i?.path.join(".") ?? ""}: ${i?.message ?? "invalid"}`,
    );
  }
  return r.data as ProxyConfig;
}

/** Reads `config.yaml` (missing = defaults). */
export async function loadProxyConfig(path: string): Promise<ProxyConfig> {
  try {
    return parseProxyConfig(await Deno.readTextFile(path));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return parseProxyConfig("");
    throw e;
  }
}

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
  } = {},
): Promise<HostProxy> {
  const config = await loadProxyConfig(`${paths.configDir}/config.yaml`);
  const creds = await loadCredentials(`${paths.configDir}/credentials.yaml`);
  const ca = await loadCa(`${paths.stateDir}/ca`);
  const incus = createIncusClient({ socket: paths.socket });
  const cleanup: (() => Promise<void> | void)[] = [() => incus.close()];
  try {
    const gateway = config.gateway ?? await bridgeGateway(incus, config.bridge);
    if (!gateway) {
      throw new IsbError(
        "invalid",
        `start proxy: bridge "${config.bridge}" has no IPv4 address; set proxy.gateway`,
      );
    }
    const policy = new Policy(creds, {
      domains: config.domains,
      ...(opts.toolRules ? { toolRules: opts.toolRules } : {}),
      ...(config.hosts ? { hosts: config.hosts } : {}),
    });
    const guard = new BridgeGuard(nftBinary());
    cleanup.unshift(() => guard.close());
    const registry = new ClientRegistry(incusSource(incus), {
      now: Date.now,
      onListing: (list) => guard.sync(list.flatMap((i) => i.guard ?? [])),
    });
    cleanup.unshift(() => registry.close());
    // Not awaited: a slow Incus must not keep the proxy from answering; callers wait instead.
    registry.start().catch(() => {});
    const egress = new EgressSecrets({ dir: `${paths.isbStateDir}/egress` });
    await egress.start();
    cleanup.unshift(() => egress.close());
    let dnsConfigured = false;
    if (config.dns) {
      try {
        await applyDns(incus, config.bridge, { names: policy.dnsNames(), gateway });
        dnsConfigured = true;
      } catch (e) {
        log.warn("proxy: could not set the bridge DNS", {
          bridge: config.bridge,
          error: (e as Error).message,
        });
      }
    }
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
      dnsConfigured,
      limits: {
        connectionsPerInstance: config.limits.connections_per_instance,
        headerTimeoutMs: config.limits.header_timeout,
        keepAliveMs: config.limits.keepalive_timeout,
        streamIdleMs: config.limits.stream_idle_timeout,
      },
      ...(opts.shutdown ? { shutdown: opts.shutdown } : {}),
    });
    cleanup.unshift(() => handle.close());
    const listeners = new EgressListeners({
      clients: registry,
      counter: handle.counter,
      dir: `${paths.isbStateDir}/egress`,
      bridgeInfo: async (bridge) => bridgeInfoOf((await incus.getNetwork(bridge)).value.config),
    });
    cleanup.unshift(() => listeners.close());
    egress.watch((entries) => void listeners.sync(entries));
    const proxyOnly = followProxyOnly(incus, handle, config, policy.dnsNames());
    cleanup.unshift(() => proxyOnly.close());
    await proxyOnly.start();
    log.info("proxy: listening", { ...handle.health().listen, domains: policy.domains.join(",") });
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
  dnsNames: readonly string[],
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
        await applyDns(incus, bridge, { names: dnsNames, gateway }).catch((e) =>
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
