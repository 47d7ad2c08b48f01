/**
 * The `proxy:` block of `config.yaml` with its defaults: where the proxy listens, which
 * bridges it serves, which extra domains it intercepts, its limits. Every `isx proxy`
 * subcommand and `isx build`/`isx branch` read it through {@link loadProxyConfig}, so they
 * agree. A comment-only file means the defaults. Read with rpc/yaml.ts (js-yaml, pre-built)
 * and checked with shape.ts, not zod, which would stay resident in the proxy.
 *
 * ```yaml
 * proxy:
 *   bridge: incusbr0          # whose gateway the proxy listens on
 *   proxy_only_bridge: isxproxy0     # also served when it exists (isx branch --network proxy-only)
 *   proxy_only_subnets: 10.78.0.0/16 # where isx branch picks that bridge's /24
 *   gateway: 10.77.0.1        # default: the bridge's ipv4.address
 *   ports: { tls: 443, forward: 3128, health: 18080 }
 *   dns: true                 # keep the bridge's raw.dnsmasq block up to date
 *   nft_prefix: isx           # its nft tables: <prefix>_guard, <prefix>_connlimit
 *   domains: [registry.npmjs.org]
 *   hosts: { anthropic: [api.anthropic.com] }
 *   limits: { connections_per_instance: 256, header_timeout: 30s, keepalive_timeout: 2m,
 *             stream_idle_timeout: 15m }
 * ```
 *
 * @module
 */

import { IsbError, parseDuration, parseYaml } from "../../rpc/base.ts";
import { bad, boolean, integer, list, type Path, strictMapping, string } from "./shape.ts";

/** The proxy-only bridge's default name (isx branch --network proxy-only makes it). */
export const PROXY_ONLY_BRIDGE = "isxproxy0";

/** The default ports (team contract). */
export const DEFAULT_PORTS = { tls: 443, forward: 3128, health: 18080 } as const;

/** A duration (`30s`, `2m`, or seconds as a number) in milliseconds, at least 1 ms. */
function duration(v: unknown, path: Path, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v === "string" || typeof v === "number") {
    try {
      const ms = parseDuration(v);
      if (ms >= 1) return ms;
    } catch { /* reported below */ }
  }
  return bad(path, `"${v}" is not a duration like 30s, 2m or 90`);
}

const port = (v: unknown, path: Path, fallback: number) =>
  v === undefined ? fallback : integer(v, path, 0, 65535);
const names = (v: unknown, path: Path) => list(v, path, (x, p) => string(x, p, { min: 1 }));

/** The `proxy:` block's shape, defaults applied; throws `IsbError("invalid", "proxy.…: …")`. */
function checkBlock(v: unknown): ProxyConfig {
  const P = ["proxy"];
  const o = strictMapping(v, P, [
    "bridge",
    "proxy_only_bridge",
    "proxy_only_subnets",
    "gateway",
    "ports",
    "dns",
    "nft_prefix",
    "domains",
    "hosts",
    "limits",
  ]);
  const ports = strictMapping(o.ports === undefined ? {} : o.ports, [...P, "ports"], [
    "tls",
    "forward",
    "health",
  ]);
  const limits = strictMapping(o.limits === undefined ? {} : o.limits, [...P, "limits"], [
    "connections_per_instance",
    "header_timeout",
    "keepalive_timeout",
    "stream_idle_timeout",
  ]);
  const L = [...P, "limits"];
  const out: ProxyConfig = {
    bridge: o.bridge === undefined ? "incusbr0" : string(o.bridge, [...P, "bridge"], { min: 1 }),
    proxy_only_bridge: o.proxy_only_bridge === undefined
      ? PROXY_ONLY_BRIDGE
      : string(o.proxy_only_bridge, [...P, "proxy_only_bridge"], {
        re: /^[A-Za-z0-9_.-]{1,15}$/,
        what: "a network name of at most 15 characters",
      }),
    proxy_only_subnets: o.proxy_only_subnets === undefined
      ? "10.78.0.0/16"
      : string(o.proxy_only_subnets, [...P, "proxy_only_subnets"], {
        re: /^\d{1,3}\.\d{1,3}\.0\.0\/16$/,
        what: "a /16 like 10.78.0.0/16",
      }),
    ports: {
      tls: port(ports.tls, [...P, "ports", "tls"], DEFAULT_PORTS.tls),
      forward: port(ports.forward, [...P, "ports", "forward"], DEFAULT_PORTS.forward),
      health: port(ports.health, [...P, "ports", "health"], DEFAULT_PORTS.health),
    },
    dns: o.dns === undefined ? true : boolean(o.dns, [...P, "dns"]),
    nft_prefix: o.nft_prefix === undefined ? "isx" : string(o.nft_prefix, [...P, "nft_prefix"], {
      re: /^[a-z][a-z0-9_]{0,20}$/,
      what: "a lowercase name of at most 21 letters, digits and underscores",
    }),
    domains: o.domains === undefined ? [] : names(o.domains, [...P, "domains"]),
    limits: {
      connections_per_instance: limits.connections_per_instance === undefined
        ? 256
        : integer(limits.connections_per_instance, [...L, "connections_per_instance"], 1, 65535),
      header_timeout: duration(limits.header_timeout, [...L, "header_timeout"], 30_000),
      keepalive_timeout: duration(limits.keepalive_timeout, [...L, "keepalive_timeout"], 120_000),
      stream_idle_timeout: duration(
        limits.stream_idle_timeout,
        [...L, "stream_idle_timeout"],
        900_000,
      ),
    },
  };
  if (o.gateway !== undefined) out.gateway = string(o.gateway, [...P, "gateway"], { min: 1 });
  if (o.hosts !== undefined) {
    const H = [...P, "hosts"];
    const h = strictMapping(o.hosts, H, ["anthropic", "openai", "github"]);
    out.hosts = {};
    for (const k of ["anthropic", "openai", "github"] as const) {
      if (h[k] !== undefined) out.hosts[k] = names(h[k], [...H, k]);
    }
  }
  return out;
}

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
  /**
   * The prefix of the proxy's nft tables (`<prefix>_guard`, `<prefix>_connlimit`): a second
   * proxy on the host (a test's) keeps its own and never replaces or removes the first's.
   */
  nft_prefix: string;
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

/**
 * The nftables tables of the proxy serving `bridge`: `bridge isx_guard` and
 * `inet isx_connlimit` on the default bridge `incusbr0`, suffixed with the bridge's name
 * (lowercase, other characters `_`) on any other, so two proxies on different bridges (a
 * second isx home, the test suite's lab next to a user's install) never replace or remove
 * each other's tables; a `prefix` other than `isx` (`proxy.nft_prefix`, for a second proxy
 * on the same bridge) names them alone: `<prefix>_guard`, `<prefix>_connlimit`.
 */
export function nftTables(
  bridge: string,
  prefix = "isx",
): { guard: string; connLimit: string } {
  // a prefix of its own already sets the tables apart (and keeps names short: nft's limit)
  if (bridge === "incusbr0" || prefix !== "isx") {
    return { guard: `${prefix}_guard`, connLimit: `${prefix}_connlimit` };
  }
  const tail = bridge.toLowerCase().replace(/[^a-z0-9_]/g, "_").slice(0, 15);
  return { guard: `${prefix}_guard_${tail}`, connLimit: `${prefix}_connlimit_${tail}` };
}

/** Parses `config.yaml` text and returns its `proxy:` block (other blocks are not ours). */
export function parseProxyConfig(text: string): ProxyConfig {
  let doc: unknown = null;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new IsbError("parse", `read config: ${(e as Error).message}`);
  }
  const block =
    (doc && typeof doc === "object" ? (doc as Record<string, unknown>).proxy : undefined) ?? {};
  try {
    return checkBlock(block);
  } catch (e) {
    throw new IsbError("invalid", `read config: ${(e as Error).message}`);
  }
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

/**
 * The part of `config.yaml` only a restart applies, as text (ports, bridge, gateway, limits,
 * DNS management): `hosts` and `domains` decide where credentials go and are reloaded live.
 */
export function restartOnlyPart(text: string): string {
  const { hosts: _h, domains: _d, ...rest } = parseProxyConfig(text);
  return JSON.stringify(rest);
}
