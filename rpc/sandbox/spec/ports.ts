/**
 * Ports (`ports:` entries, isb-rpc.md §7.2) in their three forms: docker's short string,
 * docker's long mapping, and the incus proxy form. All parse into one internal model
 * ({@link PortSpec}); {@link portToJson} writes it back in the mapping form when it can and
 * the proxy form otherwise. Address normalisation (§8.2) lives here too, because both the
 * serialiser and the resolver need it.
 *
 * @module
 */

import * as z from "zod";
import { normalizeAddr, splitAddr } from "./addr.ts";
import { type Ctx, fail, IntOrString, poly, StringMap, sub } from "./scalars.ts";

/** A port, as the engine models it. */
export interface PortSpec {
  /** Device name (default `port-<bind>-<listen port>`). */
  name?: string;
  /** Which side listens. */
  bind: "host" | "guest";
  /** incus listen address, or any shorthand {@link normalizeAddr} accepts. */
  listen: string;
  /** incus connect address, same forms. */
  connect: string;
  /** Host-bound tcp/udp only: how many ports past `listen` may be tried. */
  search?: number;
  /** Extra proxy device properties, verbatim. */
  options: Record<string, string>;
}

/** Docker's long port syntax. */
export const PortMapping = z.strictObject({
  name: z.string().optional().describe("incus device name"),
  target: IntOrString.describe("Port in the guest, or a range as long as `published`'s"),
  published: IntOrString.describe("Port on the host; a range with one target searches"),
  host_ip: z.string().optional().describe("Host address (default 127.0.0.1)"),
  protocol: z.string().optional().describe("`tcp` (default) or `udp`"),
  options: StringMap.optional(),
});

/** The incus proxy form, either direction. */
export const ProxyPort = z.strictObject({
  name: z.string().optional().describe("incus device name"),
  bind: z.enum(["host", "guest"]).optional().describe("`host` (default) or `guest`"),
  listen: IntOrString.describe("`5173`, `HOST:5173`, `5173/udp`, `tcp:HOST:PORT`, `unix:PATH`"),
  connect: IntOrString.describe("Same forms as listen"),
  options: StringMap.optional(),
});

const SEARCH_HINT = 'search is not an isb key: publish a range instead, e.g. "5173-5223:5173" ' +
  "or published: 5173-5223";

function portRange(s: string, what: string, spec: string): [number, number] | string {
  const bad = `port ${JSON.stringify(spec)}: ${what} ${JSON.stringify(s)} is not a port or range`;
  const one = (n: string) => {
    const t = n.trim();
    const v = /^[0-9]+$/.test(t) ? Number(t) : NaN;
    return v > 0 && v <= 65535 ? v : undefined;
  };
  const dash = s.indexOf("-");
  if (dash < 0) {
    const n = one(s);
    return n === undefined ? bad : [n, n];
  }
  const a = one(s.slice(0, dash));
  const b = one(s.slice(dash + 1));
  return a === undefined || b === undefined || b < a ? bad : [a, b];
}

/** A docker-style published port; a message on error. */
export function dockerPort(
  hostIp: string | undefined,
  published: string,
  target: string,
  proto: string,
): PortSpec | string {
  const spec = `${hostIp ?? "127.0.0.1"}:${published}:${target}/${proto}`;
  if (proto !== "tcp" && proto !== "udp") {
    return `port ${JSON.stringify(spec)}: protocol is tcp or udp`;
  }
  const h = hostIp?.trim();
  const host = !h ? "127.0.0.1" : h.includes(":") && !h.startsWith("[") ? `[${h}]` : h;
  const p = portRange(published, "published", spec);
  if (typeof p === "string") return p;
  const t = portRange(target, "target", spec);
  if (typeof t === "string") return t;
  const [pa, pb] = p;
  const [ta, tb] = t;
  if (ta === tb) {
    const out: PortSpec = {
      bind: "host",
      listen: `${proto}:${host}:${pa}`,
      connect: `${proto}:${ta}`,
      options: {},
    };
    if (pb > pa) out.search = pb - pa;
    return out;
  }
  if (pb - pa === tb - ta) {
    return {
      bind: "host",
      listen: `${proto}:${host}:${pa}-${pb}`,
      connect: `${proto}:${ta}-${tb}`,
      options: {},
    };
  }
  return `port ${JSON.stringify(spec)}: a target range needs a published range of the same length`;
}

/** Docker's short syntax `[HOST_IP:]PUBLISHED:TARGET[/PROTOCOL]`; a message on error. */
export function dockerShortPort(s: string): PortSpec | string {
  let body = s;
  let proto = "tcp";
  const slash = s.lastIndexOf("/");
  if (slash >= 0) {
    proto = s.slice(slash + 1);
    body = s.slice(0, slash);
    if (proto !== "tcp" && proto !== "udp") {
      return `port ${JSON.stringify(s)}: protocol is tcp or udp`;
    }
  }
  let ip: string | undefined;
  let rest = body;
  if (body.startsWith("[")) {
    const end = body.indexOf("]:");
    if (end < 0) return `port ${JSON.stringify(s)}: expected [IPv6]:PUBLISHED:TARGET`;
    ip = body.slice(1, end);
    rest = body.slice(end + 2);
  }
  const parts = rest.split(":");
  if (ip === undefined && parts.length === 1) {
    return `port ${JSON.stringify(s)}: isb needs the host port too, e.g. ${body}:${body} ` +
      "(docker would pick a random one)";
  }
  if (ip === undefined && parts.length === 3) ip = parts.shift();
  if (parts.length !== 2) {
    return `port ${JSON.stringify(s)}: expected [HOST_IP:]PUBLISHED:TARGET[/udp]`;
  }
  return dockerPort(ip, parts[0]!, parts[1]!, proto);
}

function parsePort(v: unknown, ctx: Ctx): PortSpec {
  const prefixed = (m: string) => fail(ctx, `port: ${m.replace(/^port /, "")}`);
  if (typeof v === "string" || (typeof v === "number" && Number.isInteger(v))) {
    const p = dockerShortPort(String(v));
    return typeof p === "string" ? prefixed(p) : p;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    return fail(
      ctx,
      "port: expected [HOST_IP:]PUBLISHED:TARGET[/PROTOCOL], {target, published, ...} or " +
        "{listen, connect, ...}",
    );
  }
  if ("search" in v) return fail(ctx, `port: ${SEARCH_HINT}`);
  if ("listen" in v || "connect" in v || "bind" in v) {
    const r = sub(ProxyPort, v, ctx);
    if (!r) return z.NEVER;
    const out: PortSpec = {
      bind: r.bind ?? "host",
      listen: r.listen,
      connect: r.connect,
      options: r.options ?? {},
    };
    if (r.name !== undefined) out.name = r.name;
    return out;
  }
  const m = sub(PortMapping, v, ctx);
  if (!m) return z.NEVER;
  const p = dockerPort(m.host_ip, m.published, m.target, m.protocol ?? "tcp");
  if (typeof p === "string") return prefixed(p);
  if (m.name !== undefined) p.name = m.name;
  p.options = m.options ?? {};
  return p;
}

/** A port in any of the three forms, parsed to {@link PortSpec}. */
export const Port = poly(
  z.union([
    z.string().describe(
      "[HOST_IP:]PUBLISHED:TARGET[/PROTOCOL]; HOST_IP defaults to 127.0.0.1; PUBLISHED may " +
        "be a range (5173-5223) to take the first free port",
    ),
    PortMapping,
    ProxyPort,
  ]).describe("A published port, docker style, or an incus proxy in either direction"),
  parsePort,
);

/** The port of a connect address with no host or a default guest host, and its protocol. */
function connectPort(connect: string): [string, string] | undefined {
  let proto = "tcp";
  let rest = connect;
  const colon = connect.indexOf(":");
  const head = colon < 0 ? "" : connect.slice(0, colon);
  if (head === "tcp" || head === "udp") {
    proto = head;
    rest = connect.slice(colon + 1);
  } else {
    const slash = connect.lastIndexOf("/");
    const p = slash < 0 ? "" : connect.slice(slash + 1);
    if (p === "tcp" || p === "udp") {
      proto = p;
      rest = connect.slice(0, slash);
    }
  }
  const last = rest.lastIndexOf(":");
  let port = rest;
  if (last >= 0) {
    const h = rest.slice(0, last);
    if (h !== "127.0.0.1" && h !== "0.0.0.0") return undefined;
    port = rest.slice(last + 1);
  }
  return /^[0-9]+$/.test(port) && Number(port) <= 65535 ? [proto, port] : undefined;
}

function portNumber(p: string): number | string {
  return /^[0-9]+$/.test(p) && Number(p) <= 65535 ? Number(p) : p;
}

/** The normalised JSON form of a port: docker's mapping when possible, else the proxy form. */
export function portToJson(p: PortSpec): Record<string, unknown> {
  const options = Object.keys(p.options).length > 0 ? { options: p.options } : {};
  const name = p.name !== undefined ? { name: p.name } : {};
  if (p.bind === "host") {
    let listen: string | undefined;
    try {
      listen = normalizeAddr(p.listen, "127.0.0.1");
    } catch {
      listen = undefined;
    }
    const l = listen === undefined ? undefined : splitAddr(listen);
    const c = connectPort(p.connect);
    if (l && c && l[0] === c[0] && l[2] + (p.search ?? 0) <= 65535) {
      const [proto, host, lport] = l;
      const published = p.search ? `${lport}-${lport + p.search}` : String(lport);
      return {
        ...name,
        target: portNumber(c[1]),
        published: portNumber(published),
        ...(host !== "127.0.0.1" ? { host_ip: host.replace(/^\[|\]$/g, "") } : {}),
        ...(proto !== "tcp" ? { protocol: proto } : {}),
        ...options,
      };
    }
  }
  return {
    ...name,
    ...(p.bind !== "host" ? { bind: p.bind } : {}),
    listen: p.listen,
    connect: p.connect,
    ...options,
  };
}

export { normalizeAddr, splitAddr };
