/**
 * Config drift: the proxy reads `config.yaml` and `credentials.yaml` once, at start, so an
 * edit takes effect only after `isx proxy restart`. {@link ConfigWatch} keeps each file's
 * SHA-256 from start and `/health` compares it with the file as it is now
 * (`configDrifted`), so `isx proxy status` and the preflight of `isx branch` can say
 * "restart" instead of leaving a user to wonder why a new key is not used. Only digests
 * are kept: never a file's text.
 *
 * @module
 */

async function digest(path: string): Promise<string> {
  let bytes: Uint8Array<ArrayBuffer>;
  try {
    bytes = await Deno.readFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "missing";
    return `unreadable: ${(e as Error).name}`;
  }
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(d, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** The digests of some files at start, to compare with later. */
export class ConfigWatch {
  readonly #start: ReadonlyMap<string, string>;

  /** Wraps digests taken by {@link ConfigWatch.start}. */
  constructor(start: Map<string, string>) {
    this.#start = start;
  }

  /** Records each file's digest now (a missing file is recorded as missing). */
  static async start(paths: readonly string[]): Promise<ConfigWatch> {
    const m = new Map<string, string>();
    for (const p of paths) m.set(p, await digest(p));
    return new ConfigWatch(m);
  }

  /** The files whose content changed since start (created, edited or removed). */
  async drifted(): Promise<string[]> {
    const out: string[] = [];
    for (const [p, was] of this.#start) if ((await digest(p)) !== was) out.push(p);
    return out;
  }
}
