/**
 * The leaf certificates an intercepting listener presents, one per server name (SNI): issued
 * by the CA on first use, kept in memory (never written), refused for any name the listener
 * does not intercept. The TLS side that asks for them is proxy/tls/sni.ts.
 *
 * Concurrent first handshakes for one name share one issuance; a failed issuance is not
 * kept. The cache is bounded (least recently used names go first) and a leaf older than
 * `maxAgeMs` is issued again, so a long-running proxy never presents an expired one. The
 * fallback when the runtime offers no SNI hook is {@link LeafCache.all}: one leaf naming
 * every intercepted domain and its one-level wildcard. Pure: the CA and the clock come in.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** A certificate chain and its private key, PEM. */
export interface Leaf {
  /** The leaf then the CA certificate. */
  certPem: string;
  /** The leaf's private key (PKCS#8). */
  keyPem: string;
}

/** Who signs leaves (the host CA, or an isb egress bridge's CA). */
export interface LeafIssuer {
  /** Signs a leaf for `names`. */
  issueLeaf(names: readonly string[], opts?: { now?: number }): Promise<Leaf>;
}

/** Options of {@link LeafCache}. */
export interface LeafCacheOptions {
  /** True when TLS for `name` (lower case, no trailing dot) is intercepted here. */
  accepts(name: string): boolean;
  /** The names of the single fallback leaf ({@link LeafCache.all}). */
  allNames: readonly string[];
  /** Names kept at most (default 512). */
  max?: number;
  /** Age after which a leaf is issued again (default 30 days). */
  maxAgeMs?: number;
  /** The clock (epoch ms). */
  now?: () => number;
}

interface Entry {
  leaf: Promise<Leaf>;
  issuedAt: number;
}

const DAY = 86_400_000;
/** A DNS name as a TLS client may send it: letters, digits, hyphens, dots; 253 at most. */
const DNS_NAME =
  /^(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Per-name leaves of one CA for one listener's set of names. */
export class LeafCache {
  readonly #issuer: LeafIssuer;
  readonly #accepts: (name: string) => boolean;
  readonly #allNames: readonly string[];
  readonly #max: number;
  readonly #maxAge: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  #all: Promise<Leaf> | undefined;

  /** Creates it (nothing is issued until a name is asked for). */
  constructor(issuer: LeafIssuer, o: LeafCacheOptions) {
    this.#issuer = issuer;
    this.#accepts = o.accepts;
    this.#allNames = [...o.allNames];
    this.#max = o.max ?? 512;
    if (!(this.#max >= 1)) throw new RangeError("LeafCache: max must be at least 1");
    this.#maxAge = o.maxAgeMs ?? 30 * DAY;
    this.#now = o.now ?? Date.now;
  }

  /** Names cached now. */
  get size(): number {
    return this.#entries.size;
  }

  /** The leaf for `serverName` (the SNI); rejects with `forbidden` for a name not intercepted. */
  forName(serverName: string): Promise<Leaf> {
    const name = serverName.toLowerCase().replace(/\.$/, "");
    if (name === "") {
      return Promise.reject(
        new IsbError("forbidden", "issue leaf: the client sent no server name (SNI)"),
      );
    }
    if (!DNS_NAME.test(name) || !this.#accepts(name)) {
      return Promise.reject(
        new IsbError("forbidden", `issue leaf for "${name.slice(0, 253)}": not intercepted here`),
      );
    }
    const now = this.#now();
    const hit = this.#entries.get(name);
    if (hit) {
      this.#entries.delete(name);
      if (now - hit.issuedAt < this.#maxAge) {
        this.#entries.set(name, hit);
        return hit.leaf;
      }
    }
    const entry: Entry = { leaf: this.#issuer.issueLeaf([name], { now }), issuedAt: now };
    this.#entries.set(name, entry);
    entry.leaf.catch(() => {
      if (this.#entries.get(name) === entry) this.#entries.delete(name);
    });
    while (this.#entries.size > this.#max) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
    return entry.leaf;
  }

  /** The fallback: one leaf naming every name of `allNames` (issued once). */
  all(): Promise<Leaf> {
    this.#all ??= this.#issuer.issueLeaf(this.#allNames, { now: this.#now() });
    this.#all.catch(() => (this.#all = undefined));
    return this.#all;
  }
}
