/**
 * Proxy addresses (isb-rpc.md §8.2): incus' `proto:host:port` form and the shorthands that
 * expand to it (`5173`, `HOST:5173`, `5173/udp`, `tcp:5173`, `udp:H:P`, `unix:PATH`). Pure;
 * shared by the port serialiser (ports.ts) and the resolver, which imports it rather than
 * ports.ts so the engine builds none of the spec's schemas (docs/decisions.md, "The spec's
 * schemas only where a spec is read").
 *
 * @module
 */

import { invalid } from "../../errors.ts";

/** Splits `tcp:HOST:PORT` into its parts (single numeric port only). */
export function splitAddr(addr: string): [proto: string, host: string, port: number] | undefined {
  const colon = addr.indexOf(":");
  if (colon < 0) return undefined;
  const proto = addr.slice(0, colon);
  if (proto !== "tcp" && proto !== "udp") return undefined;
  const rest = addr.slice(colon + 1);
  const last = rest.lastIndexOf(":");
  if (last < 0) return undefined;
  const port = rest.slice(last + 1);
  if (!/^[0-9]+$/.test(port) || Number(port) > 65535) return undefined;
  return [proto, rest.slice(0, last), Number(port)];
}

/**
 * Expands a proxy address to incus' `proto:host:port` form: `5173`, `HOST:5173`, `5173/udp`,
 * `tcp:5173`, `udp:5353`, `tcp:H:P`, `udp:H:P` or `unix:PATH`; the host defaults to
 * `defaultHost`; IPv6 goes in brackets; the port may be a range or list. Throws `invalid`.
 */
export function normalizeAddr(addr: string, defaultHost: string): string {
  const a = addr.trim();
  const q = JSON.stringify(addr);
  if (a === "") throw invalid("empty address");
  if (a.startsWith("unix:")) {
    if (a === "unix:") throw invalid(`${q}: unix: needs a path`);
    return a;
  }
  let proto = "tcp";
  let rest = a;
  const colon = a.indexOf(":");
  const head = colon < 0 ? "" : a.slice(0, colon);
  if (head === "tcp" || head === "udp") {
    proto = head;
    rest = a.slice(colon + 1);
  } else {
    const slash = a.lastIndexOf("/");
    if (slash >= 0) {
      const p = a.slice(slash + 1);
      if (p === "tcp" || p === "udp") {
        proto = p;
        rest = a.slice(0, slash);
      } else if (!p.includes(":")) {
        throw invalid(`${q}: unknown protocol ${JSON.stringify(p)} (tcp or udp)`);
      }
    }
  }
  let host: string;
  let port: string;
  if (rest.startsWith("[")) {
    const end = rest.indexOf("]");
    if (end < 0) throw invalid(`${q}: unclosed [ in IPv6 host`);
    if (rest[end + 1] !== ":") throw invalid(`${q}: expected [IPv6]:PORT`);
    host = rest.slice(0, end + 1);
    port = rest.slice(end + 2);
  } else {
    const last = rest.lastIndexOf(":");
    if (last < 0) {
      host = defaultHost;
      port = rest;
    } else {
      host = rest.slice(0, last);
      port = rest.slice(last + 1);
      if (host.includes(":")) {
        throw invalid(`${q}: put an IPv6 host in brackets, e.g. [::1]:5173`);
      }
    }
  }
  if (host === "") throw invalid(`${q}: empty host`);
  const okPort = (n: string) => /^[0-9]+$/.test(n) && Number(n) > 0 && Number(n) <= 65535;
  const valid = port !== "" &&
    port.split(",").every((part) => {
      const dash = part.indexOf("-");
      return dash < 0 ? okPort(part) : okPort(part.slice(0, dash)) && okPort(part.slice(dash + 1));
    });
  if (!valid) {
    throw invalid(
      `${q}: expected PORT, HOST:PORT or PROTO:HOST:PORT (e.g. 5173, 0.0.0.0:5173, udp:5353)`,
    );
  }
  return `${proto}:${host}:${port}`;
}
