/**
 * The proxy side of isb egress (isb-rpc.md §13): for each egress bridge with a
 * `secrets.json`, a TLS server on the bridge's own address, on every allowed port, using
 * that bridge's CA (`<isbStateDir>/egress/<bridge>/ca.{crt,key}`, which isb installed in the
 * sandbox) for a leaf per allowed server name (proxy/tls/leaf_cache.ts; any other name fails the
 * handshake). The sandbox's DNS sends allowed names to
 * the bridge address and its ACL lets it reach nothing else, so this is its only way out.
 *
 * Requests are served by the same relay as isx instances (proxy/tls/intercept.ts), with a policy that
 * injects no isx credential: only the sandbox's own placeholders are replaced, and only on
 * the hosts its secrets name; other allowed hosts are relayed as they are; any other Host is
 * refused (421). An allowed host name is connected to only at a public address the proxy
 * resolved itself, none of the host's own nor in its interfaces' subnets (DNS-rebinding
 * defence, proxy/egress/guard.ts); a host that is literally
 * an IP address is used as allowed. Counting works as for any caller. Listeners follow the files: a new,
 * changed or removed `secrets.json` starts, restarts or stops its bridge's servers.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { signerFromPem } from "../tls/ca.ts";
import type { Caller, CallerLookup } from "../callers/clients.ts";
import { Handoff } from "../callers/handoff.ts";
import type { ActivityCounter } from "../activity/counter.ts";
import { emptyCredentials } from "../config/credentials.ts";
import { type EgressEntry, egressLookup, hostPattern } from "./secrets.ts";
import { matchDomain, Policy } from "../config/policy.ts";
import { type InterceptServer, serveIntercept } from "../tls/intercept.ts";
import { LeafCache } from "../tls/leaf_cache.ts";
import { publicGuard, type Resolver } from "./guard.ts";
import { cachedHostNets, type HostNets, systemResolver } from "./dial.ts";

/** What Incus says about an egress bridge. */
export interface BridgeInfo {
  /** The bridge's IPv4 address (what the sandbox's DNS answers). */
  address: string;
  /** Allowed `host` patterns and ports (`user.isb.egress` entries). */
  allowed: { host: string; port: number }[];
}

/** Parses a bridge's config into {@link BridgeInfo}; `undefined` without an address. */
export function bridgeInfoOf(config: Readonly<Record<string, string>>): BridgeInfo | undefined {
  const address = config["ipv4.address"]?.split("/")[0];
  if (!address || address === "none" || address === "auto") return undefined;
  let entries: unknown = [];
  try {
    entries = (JSON.parse(config["user.isb.egress"] ?? "{}") as { entries?: unknown }).entries ??
      [];
  } catch {
    entries = [];
  }
  const allowed = (Array.isArray(entries) ? entries : []).filter((e): e is string =>
    typeof e === "string"
  )
    .map((e) => {
      const m = /^(.*):(\d+)$/.exec(e);
      return { host: hostPattern(m ? m[1]! : e), port: m ? Number(m[2]) : 443 };
    });
  return { address, allowed };
}

/** What the egress listeners need. */
export interface EgressServeDeps {
  /** Source address to instance. */
  clients: CallerLookup;
  /** The shared counters. */
  counter: ActivityCounter;
  /** `<isbStateDir>/egress`. */
  dir: string;
  /** The bridge's address and allowed hosts. */
  bridgeInfo(bridge: string): Promise<BridgeInfo | undefined>;
  /** Test only: loopback origins standing in for upstream hosts. */
  overrides?: ReadonlyMap<string, string>;
  /** Test only: bind here instead of the bridge address. */
  bindHost?: string;
  /** Test only: bind this port instead of each allowed port. */
  bindPort?: (port: number) => number;
  /** Resolves upstream host names (default: the system's DNS); only public answers are used. */
  resolve?: Resolver;
  /** The host's addresses and subnets, never connected to (default: its interfaces). */
  hostNets?: () => HostNets;
}

interface Running {
  key: string;
  entry: EgressEntry;
  server: InterceptServer | undefined;
}

/** The egress bridges' TLS servers, kept in step with the secrets files. */
export class EgressListeners {
  readonly #deps: EgressServeDeps;
  readonly #running = new Map<string, Running>();
  #queue: Promise<void> = Promise.resolve();

  readonly #hostNets: () => HostNets;

  /** Creates it (nothing runs until a start or a call). */
  constructor(deps: EgressServeDeps) {
    this.#hostNets = deps.hostNets ?? cachedHostNets();
    this.#deps = deps;
  }

  /** Bound addresses per bridge (for tests and logs). */
  addrs(bridge: string): Deno.NetAddr[] {
    return this.#running.get(bridge)?.server?.addrs ?? [];
  }

  /** Starts, restarts or stops servers so they match `entries` (calls are serialised). */
  sync(entries: readonly EgressEntry[]): Promise<void> {
    this.#queue = this.#queue.then(() => this.#sync(entries)).catch((e) =>
      log.warn("proxy: egress listeners", { error: String((e as Error)?.message ?? e) })
    );
    return this.#queue;
  }

  async #sync(entries: readonly EgressEntry[]): Promise<void> {
    const wanted = new Map(entries.map((e) => [e.bridge, e]));
    for (const [bridge, r] of this.#running) {
      if (!wanted.has(bridge)) await this.#stop(bridge, r);
    }
    for (const entry of entries) {
      const info = await this.#deps.bridgeInfo(entry.bridge).catch(() => undefined);
      if (!info) continue;
      const certPem = await Deno.readTextFile(`${this.#deps.dir}/${entry.bridge}/ca.crt`).catch(
        () => "",
      );
      const key = JSON.stringify([info, certPem, entry.secrets.map((s) => [s.env, s.hosts])]);
      const cur = this.#running.get(entry.bridge);
      if (cur && cur.key === key) {
        cur.entry = entry;
        continue;
      }
      if (cur) await this.#stop(entry.bridge, cur);
      await this.#start(entry, info, key, certPem);
    }
  }

  async #start(entry: EgressEntry, info: BridgeInfo, key: string, certPem: string): Promise<void> {
    const keyPem = await Deno.readTextFile(`${this.#deps.dir}/${entry.bridge}/ca.key`).catch(() =>
      ""
    );
    if (!certPem || !keyPem) {
      return log.warn("proxy: egress bridge has no CA", { bridge: entry.bridge });
    }
    const ca = await signerFromPem(certPem, keyPem);
    const hosts = [
      ...new Set([...info.allowed.map((a) => a.host), ...entry.secrets.flatMap((s) => s.hosts)]),
    ];
    const leaves = new LeafCache(ca, {
      accepts: (name) => hosts.some((p) => matchDomain(p, name)),
      allNames: hosts,
    });
    const running: Running = { key, entry, server: undefined };
    const allowed = (caller: Caller, host: string) =>
      caller.name === running.entry.instance && hosts.some((p) => matchDomain(p, host));
    const secrets = egressLookup(() => [running.entry]);
    const ports = [...new Set([...info.allowed.map((a) => a.port), 443])];
    running.server = await serveIntercept(
      ports.map((port) => ({
        hostname: this.#deps.bindHost ?? info.address,
        port: this.#deps.bindPort?.(port) ?? port,
      })),
      {
        leaves,
        ca,
        guard: publicGuard(this.#deps.resolve ?? systemResolver(), this.#hostNets),
        deps: {
          policy: new Policy(emptyCredentials(), {
            hosts: { anthropic: [], openai: [], github: [] },
          }),
          clients: this.#deps.clients,
          counter: this.#deps.counter,
          overrides: this.#deps.overrides ?? new Map(),
          egress: { covers: allowed, ops: secrets.ops, secrets: secrets.secrets },
          handoff: new Handoff(),
        },
      },
    );
    this.#running.set(entry.bridge, running);
    log.info("proxy: serving egress bridge", {
      bridge: entry.bridge,
      address: info.address,
      ports: ports.join(","),
    });
  }

  async #stop(bridge: string, r: Running): Promise<void> {
    await r.server?.close();
    this.#running.delete(bridge);
  }

  /** Stops every server. */
  async close(): Promise<void> {
    await this.#queue;
    for (const [bridge, r] of [...this.#running]) await this.#stop(bridge, r);
  }
}
