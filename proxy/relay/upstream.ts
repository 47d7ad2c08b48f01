/**
 * Where an intercepted request goes: `https://<host>` of the real service, or, in tests
 * only, a loopback origin standing in for it. An override that does not point at loopback
 * is refused at start, so a configuration mistake can never send credentials elsewhere.
 * Pure.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** True for 127.0.0.0/8, ::1 and `localhost`. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) ||
    /^::ffff:127\./.test(h);
}

/** Validates test-only overrides (`host → http://127.0.0.1:port`); returns normalised origins. */
export function checkOverrides(
  overrides: Readonly<Record<string, string>> = {},
): Map<string, string> {
  const out = new Map<string, string>();
  for (const [host, target] of Object.entries(overrides)) {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new IsbError("invalid", `upstream override for "${host}": "${target}" is not a URL`);
    }
    if (!["http:", "https:"].includes(url.protocol) || !isLoopback(url.hostname)) {
      throw new IsbError(
        "invalid",
        `upstream override for "${host}": "${target}" is not a loopback origin`,
      );
    }
    out.set(host.toLowerCase(), url.origin);
  }
  return out;
}

/** Where an intercepted request is sent. */
export interface UpstreamOrigin {
  /** TLS to the upstream (always, except for test overrides naming `http:`). */
  secure: boolean;
  /** Host name or address to connect to (and the TLS server name). */
  hostname: string;
  /** TCP port. */
  port: number;
  /** The `Host` header upstream: `hostname[:port]`, the port only when not the default. */
  authority: string;
  /** A test override's loopback origin, not the real service. */
  overridden?: true;
}

/** The upstream origin for a request to `host[:port]`. */
export function upstreamOrigin(
  target: { host: string; port?: number },
  overrides: ReadonlyMap<string, string>,
): UpstreamOrigin {
  const override = overrides.get(target.host);
  if (override) {
    const url = new URL(override);
    const secure = url.protocol === "https:";
    return {
      secure,
      hostname: url.hostname.replace(/^\[|\]$/g, ""),
      port: url.port ? Number(url.port) : secure ? 443 : 80,
      authority: url.host,
      overridden: true,
    };
  }
  const port = target.port ?? 443;
  return {
    secure: true,
    hostname: target.host,
    port,
    authority: port === 443 ? target.host : `${target.host}:${port}`,
  };
}

/** The upstream URL for a request to `host[:port]` with this path and query. */
export function upstreamUrl(
  target: { host: string; port?: number; pathAndQuery: string },
  overrides: ReadonlyMap<string, string>,
): string {
  const o = upstreamOrigin(target, overrides);
  return `${o.secure ? "https" : "http"}://${o.authority}${target.pathAndQuery}`;
}
