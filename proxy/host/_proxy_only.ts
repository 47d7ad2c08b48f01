/**
 * The proxy on isx's proxy-only bridge (`isxproxy0` unless `proxy.proxy_only_bridge` says
 * otherwise). `isx branch --network proxy-only` creates that bridge when it is missing, maybe
 * long after the proxy started, so {@link BridgeFollower} keeps the proxy in step with it:
 * while the bridge exists, carries isx's mark (`user.isx.role=proxy-only`) and has an
 * address, the proxy serves TLS interception and the forward proxy on its gateway and keeps
 * its `raw.dnsmasq` block there; when it goes, the listeners go. It looks again on every
 * Incus `network-*` lifecycle event and, as a safety net, on a slow timer.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { followEvents } from "../callers/follow.ts";

/** The mark isx puts on its proxy-only bridge (mcp/instances/network.ts writes it). */
export const KEY_ISX_ROLE = "user.isx.role";
/** The mark's value. */
export const ROLE_PROXY_ONLY = "proxy-only";

/** The gateway of a proxy-only bridge's config, or `undefined` (not isx's, no address). */
export function proxyOnlyGateway(config: Readonly<Record<string, string>>): string | undefined {
  if (config[KEY_ISX_ROLE] !== ROLE_PROXY_ONLY) return undefined;
  const ip = config["ipv4.address"]?.split("/")[0] ?? "";
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(ip) ? ip : undefined;
}

/** What the follower reads and does. */
export interface FollowerDeps {
  /** The bridge's gateway now (`undefined`: no such bridge, not isx's, no address). */
  read(): Promise<string | undefined>;
  /** Starts serving `gateway` (listeners and DNS). */
  serve(gateway: string): Promise<void>;
  /** Stops serving `gateway`. */
  unserve(gateway: string): Promise<void>;
  /** Any item means "a network may have changed"; ends when `signal` aborts. */
  changes?(signal: AbortSignal): AsyncIterable<unknown>;
  /** Safety-net period (default 30 s). */
  periodMs?: number;
}

/** Keeps the proxy serving the proxy-only bridge's gateway while the bridge exists. */
export class BridgeFollower {
  readonly #deps: FollowerDeps;
  #serving: string | undefined;
  #queue: Promise<void> = Promise.resolve();
  readonly #abort = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #loop: Promise<void> | undefined;

  /** Creates it (nothing runs until {@link BridgeFollower.start}). */
  constructor(deps: FollowerDeps) {
    this.#deps = deps;
  }

  /** The gateway served now, if any. */
  get serving(): string | undefined {
    return this.#serving;
  }

  /** Looks once now and then follows changes; resolves after the first look. */
  start(): Promise<void> {
    const period = this.#deps.periodMs ?? 30_000;
    const tick = () => {
      this.sync().finally(() => {
        if (!this.#abort.signal.aborted) this.#timer = setTimeout(tick, period);
      });
    };
    this.#timer = setTimeout(tick, period);
    const changes = this.#deps.changes;
    if (changes) {
      this.#loop = followEvents(changes.bind(this.#deps), {
        signal: this.#abort.signal,
        onEvent: () => this.sync(),
        what: "network event stream",
      });
    }
    return this.sync();
  }

  /** Reads the bridge and starts, moves or stops serving (calls are serialised). */
  sync(): Promise<void> {
    this.#queue = this.#queue.then(() => this.#sync()).catch((e) =>
      log.warn("proxy: proxy-only bridge", { error: String((e as Error)?.message ?? e) })
    );
    return this.#queue;
  }

  async #sync(): Promise<void> {
    if (this.#abort.signal.aborted) return;
    const want = await this.#deps.read();
    if (want === this.#serving) return;
    if (this.#serving !== undefined) {
      const old = this.#serving;
      this.#serving = undefined;
      await this.#deps.unserve(old);
    }
    if (want !== undefined) {
      await this.#deps.serve(want);
      this.#serving = want;
    }
  }

  /** Stops following and serving. */
  async close(): Promise<void> {
    this.#abort.abort();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#loop;
    await this.#queue;
    if (this.#serving !== undefined) {
      const old = this.#serving;
      this.#serving = undefined;
      await this.#deps.unserve(old).catch(() => {});
    }
  }
}
