/**
 * Searched ports (isb-rpc.md §9.5): a host-bound proxy device whose listen port may be any
 * in `start..=start+search`. Each candidate is first probed by binding it locally (cheaper
 * than a failed device add, and it steps around listeners that are not Incus devices); an
 * address this process cannot bind for another reason is left to Incus to judge. The device
 * itself is added by the caller's `add` (an If-Match update), so this module owns only the
 * search rule and its error.
 *
 * @module
 */

import { hasCode, IsbError } from "../../errors.ts";

/** A proxy address split into its parts. */
export interface Addr {
  proto: string;
  /** Host as written in the address (IPv6 keeps its brackets). */
  host: string;
  port: number;
}

/** Splits `proto:host:port` (IPv6 host bracketed); undefined when it is not that shape. */
export function splitAddr(addr: string): Addr | undefined {
  const m = /^(tcp|udp):(\[[^\]]+\]|[^:[\]]+):(\d+)$/.exec(addr);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { proto: m[1]!, host: m[2]!, port };
}

/** True when `host:port` is already bound here (TCP); any other bind failure is false. */
export function tcpPortInUse(host: string, port: number): boolean {
  const hostname = host.startsWith("[") ? host.slice(1, -1) : host;
  try {
    const l = Deno.listen({ hostname, port, transport: "tcp" });
    l.close();
    return false;
  } catch (e) {
    return e instanceof Deno.errors.AddrInUse;
  }
}

/** Options of {@link addPortSearching}. */
export interface SearchOptions {
  /** The sandbox, for the error message. */
  name: string;
  /** The device name. */
  device: string;
  /** The device's props; `listen` holds the first port of the range. */
  props: Record<string, string>;
  /** How many ports past the first may be tried. */
  search: number;
  /** Adds the device with these props (the listen address filled in). */
  add(props: Record<string, string>): Promise<void>;
  /** Probe for a taken TCP port; {@link tcpPortInUse} by default. */
  inUse?: (host: string, port: number) => boolean;
}

/** Adds the device on the first free port of its range; returns the listen address. */
export async function addPortSearching(opts: SearchOptions): Promise<string> {
  const listen = opts.props.listen;
  if (listen === undefined) throw new IsbError("invalid", "port without listen");
  const a = splitAddr(listen);
  if (!a) throw new IsbError("invalid", `cannot search from ${listen}`);
  const inUse = opts.inUse ?? tcpPortInUse;
  const last = Math.min(65535, a.port + opts.search);
  let lastErr: IsbError | undefined;
  for (let p = a.port; p <= last; p++) {
    if (a.proto === "tcp" && inUse(a.host, p)) continue;
    const addr = `${a.proto}:${a.host}:${p}`;
    try {
      await opts.add({ ...opts.props, listen: addr });
      return addr;
    } catch (e) {
      if (!hasCode(e, "api", "operation_failed")) throw e;
      lastErr = e;
    }
  }
  const why = lastErr ? ` (last error: ${lastErr.message})` : "";
  throw new IsbError(
    "invalid",
    `${opts.name}: no free port for ${opts.device} in ${a.proto}:${a.host}:${a.port}-${last}${why}`,
  );
}

/** True when `have` is the searched device `want` settled somewhere in its range. */
export function searchedPortMatches(
  want: { props: Record<string, string>; search: number },
  have: Record<string, string>,
): boolean {
  const w = splitAddr(want.props.listen ?? "");
  const h = splitAddr(have.listen ?? "");
  if (!w || !h || w.proto !== h.proto || w.host !== h.host) return false;
  if (h.port < w.port || h.port > w.port + want.search) return false;
  const rest = (p: Record<string, string>) => {
    const { listen: _l, ...others } = p;
    return JSON.stringify(Object.entries(others).filter(([, v]) => v !== "false").sort());
  };
  return rest(want.props) === rest(have);
}
