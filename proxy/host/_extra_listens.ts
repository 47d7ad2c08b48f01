/**
 * The listeners a running proxy adds and removes on demand (isx's proxy-only bridge, once it
 * exists): the same TLS interception and forward proxy on another address, sharing the
 * leaves, the gate and everything else of the proxy's own. Changes run one at a time, and
 * none after the proxy closed.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";
import { normalizeAddress } from "../callers/clients.ts";
import { serveForward } from "../relay/forward.ts";
import { type InterceptServer, serveIntercept } from "../tls/intercept.ts";

/** A listen address a running proxy may add: TLS interception and the forward proxy. */
export interface ExtraListen {
  /** The address (a bridge's gateway). */
  hostname: string;
  /** The TLS port. */
  tls: number;
  /** The forward-proxy port. */
  forward: number;
}

/** Binds a TCP listener, or throws `io` naming the address. */
export function listenOrThrow(at: { hostname: string; port: number }): Deno.Listener {
  try {
    return Deno.listen({ hostname: at.hostname, port: at.port });
  } catch (e) {
    throw new IsbError(
      "io",
      `start proxy: listen on ${at.hostname}:${at.port}: ${(e as Error).message}`,
      { cause: e },
    );
  }
}

/** The extra listeners of one proxy, by address. */
export class ExtraListens {
  readonly #intercept: Parameters<typeof serveIntercept>[1];
  readonly #forward: Parameters<typeof serveForward>[1];
  readonly #hostAddresses: Set<string>;
  readonly #extras = new Map<string, { close(): Promise<void> }>();
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  /** Serves with these deps; `hostAddresses` (the forward proxy's "host" set) is kept current. */
  constructor(o: {
    intercept: Parameters<typeof serveIntercept>[1];
    forward: Parameters<typeof serveForward>[1];
    hostAddresses: Set<string>;
  }) {
    this.#intercept = o.intercept;
    this.#forward = o.forward;
    this.#hostAddresses = o.hostAddresses;
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(f);
    this.#queue = p.catch(() => {});
    return p;
  }

  /** Serves `at` (replacing what served that address); resolves to the bound addresses. */
  add(at: ExtraListen): Promise<{ tls: Deno.NetAddr; forward: Deno.NetAddr }> {
    return this.#serial(async () => {
      if (this.#closed) throw new IsbError("invalid", `serve ${at.hostname}: the proxy is closed`);
      const old = this.#extras.get(at.hostname);
      if (old) {
        this.#extras.delete(at.hostname);
        await old.close();
      }
      const fl = listenOrThrow({ hostname: at.hostname, port: at.forward });
      let tls: InterceptServer;
      try {
        tls = await serveIntercept([{ hostname: at.hostname, port: at.tls }], this.#intercept);
      } catch (e) {
        fl.close();
        throw e;
      }
      this.#hostAddresses.add(normalizeAddress(at.hostname));
      const f = serveForward(fl, this.#forward);
      this.#extras.set(at.hostname, {
        async close() {
          await f.shutdown();
          await tls.close();
        },
      });
      return { tls: tls.addrs[0]!, forward: fl.addr as Deno.NetAddr };
    });
  }

  /** Stops serving `hostname` (nothing when it is not served). */
  remove(hostname: string): Promise<void> {
    return this.#serial(async () => {
      const x = this.#extras.get(hostname);
      if (!x) return;
      this.#extras.delete(hostname);
      this.#hostAddresses.delete(normalizeAddress(hostname));
      await x.close();
    });
  }

  /** The addresses served now. */
  names(): string[] {
    return [...this.#extras.keys()];
  }

  /** Refuses further additions, waits for the change under way, and removes every listener. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#queue;
    for (const h of this.names()) await this.remove(h);
  }
}
