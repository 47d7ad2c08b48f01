/**
 * The `proxy:` block of `config.yaml` with its defaults: where the proxy listens, which
 * bridges it serves, which extra domains it intercepts, its limits. Every `isx proxy`
 * subcommand and `isx build`/`isx branch` read it through {@link loadProxyConfig}, so they
 * agree. A comment-only file (js-yaml 5 refuses it as a document) means the defaults.
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
import { IsbError, parseDuration } from "../rpc/base.ts";
import { isEmptyYaml } from "./credentials.ts";

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
    if (!isEmptyYaml(text)) doc = load(text);
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
