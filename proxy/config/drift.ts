/**
 * Config drift: what the proxy cannot apply while it runs. Credentials (credentials.yaml,
 * and the `hosts`/`domains` of config.yaml's `proxy:` block) are reloaded live
 * (proxy/config/reload.ts); the rest of config.yaml (ports, bridge, gateway, limits, DNS
 * management) and the CA take effect only after `isx proxy restart`. {@link ConfigWatch}
 * keeps a digest of each file from start (of its restart-only part, when given a
 * canonical form) and `/health` compares it with the file as it is now (`configDrifted`),
 * so `isx proxy status` and the preflight of `isx branch` can say "restart" instead of
 * leaving a user to wonder why a new port is not used. Only digests are kept: never a
 * file's text.
 *
 * @module
 */

/** A file's restart-only part as text (what is compared); throws when it does not parse. */
export type Canonical = (text: string) => string;

async function digest(path: string, canon?: Canonical): Promise<string> {
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = await Deno.readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) bytes = new Uint8Array(0);
    else return `unreadable: ${(e as Error).name}`;
    if (!canon) return "missing";
  }
  if (canon) {
    try {
      bytes = new TextEncoder().encode(canon(new TextDecoder().decode(bytes)));
    } catch (e) {
      return `invalid: ${(e as Error).name}`;
    }
  }
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** The digests of some files at start, to compare with later. */
export class ConfigWatch {
  readonly #start: ReadonlyMap<string, string>;
  readonly #canon: Readonly<Record<string, Canonical>>;

  /** Wraps digests taken by {@link ConfigWatch.start}. */
  constructor(start: Map<string, string>, canon: Record<string, Canonical> = {}) {
    this.#start = start;
    this.#canon = canon;
  }

  /**
   * Records each file's digest now (a missing file is recorded as missing); a file with a
   * `canon` form is compared by that form only.
   */
  static async start(
    paths: readonly string[],
    canon: Record<string, Canonical> = {},
  ): Promise<ConfigWatch> {
    const m = new Map<string, string>();
    for (const p of paths) m.set(p, await digest(p, canon[p]));
    return new ConfigWatch(m, canon);
  }

  /** The files whose (restart-only) content changed since start. */
  async drifted(): Promise<string[]> {
    const out: string[] = [];
    for (const [p, was] of this.#start) {
      if ((await digest(p, this.#canon[p])) !== was) out.push(p);
    }
    return out;
  }
}
