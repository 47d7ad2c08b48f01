/**
 * isb egress secrets: `isb rpc` writes, for a sandbox whose spec has `egress.secrets`,
 * `<isbStateDir>/egress/<bridge>/secrets.json` (mode 0600):
 * `{"instance": "<project>/<name>", "secrets": [{"env","placeholder","hosts":[…],"value"}]}`.
 * The sandbox holds only the placeholder; this module tells the proxy to substitute the
 * value for the placeholder in request heads **on that sandbox's allowed hosts only**
 * (exact host, or `*.suffix` for subdomains), and adds the values to what responses are
 * scrubbed of. Files are re-read every couple of seconds (and whenever `egress/kick`
 * changes), so a new sandbox is served without a restart; a file wider than 0600 or
 * malformed is skipped with a warning that never quotes a value.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import type { Caller } from "../callers/clients.ts";
import { matchDomain } from "../config/policy.ts";
import type { HeaderOp } from "../relay/rewrite.ts";
import { Secret } from "../config/secret.ts";
import { list, mapping, string } from "../config/shape.ts";
import type { EgressLookup } from "../callers/admit.ts";

/** One sandbox's secrets as the proxy holds them. */
export interface EgressEntry {
  /** The egress bridge name. */
  bridge: string;
  /** Registry name: `name` in the default project, else `project/name`. */
  instance: string;
  /** The secrets, values wrapped. */
  secrets: { env: string; placeholder: string; hosts: string[]; value: Secret }[];
}

/** The file's shape (unknown fields ignored); throws `IsbError("invalid", "<path>: …")`. */
function checkFile(raw: unknown): { instance: string; secrets: EgressEntry["secrets"] } {
  const o = mapping(raw, []);
  return {
    instance: string(o.instance, ["instance"], { min: 1 }),
    secrets: list(o.secrets, ["secrets"], (x, p) => {
      const s = mapping(x, p);
      return {
        env: string(s.env, [...p, "env"], { min: 1 }),
        placeholder: string(s.placeholder, [...p, "placeholder"], { min: 8 }),
        hosts: list(s.hosts, [...p, "hosts"], (h, q) => string(h, q, { min: 1 })),
        value: new Secret(string(s.value, [...p, "value"])),
      };
    }),
  };
}

/** `default/x` → `x`; other projects keep their prefix. */
export function registryName(instance: string): string {
  return instance.startsWith("default/") ? instance.slice(8) : instance;
}

/** `host:port` or `*.host` → the host pattern (ports are the bridge ACL's business). */
export function hostPattern(entry: string): string {
  return entry.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "");
}

/** Parses one `secrets.json` text (values wrapped at once). */
export function parseEgressFile(bridge: string, text: string): EgressEntry {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new TypeError(`egress secrets of ${bridge}: not JSON`);
  }
  let f;
  try {
    f = checkFile(raw);
  } catch (e) {
    throw new TypeError(`egress secrets of ${bridge}: ${(e as Error).message}`);
  }
  return {
    bridge,
    instance: registryName(f.instance),
    secrets: f.secrets.filter((s) => s.value.length > 0).map((s) => ({
      ...s,
      hosts: s.hosts.map(hostPattern),
    })),
  };
}

/** The lookup over a set of entries (pure). */
export function egressLookup(entries: () => readonly EgressEntry[]): EgressLookup {
  const mine = (caller: Caller) => entries().filter((e) => e.instance === caller.name);
  return {
    covers: (caller, host) =>
      mine(caller).some((e) => e.secrets.some((s) => s.hosts.some((p) => matchDomain(p, host)))),
    ops: (caller, host) => {
      const ops: HeaderOp[] = [];
      for (const e of mine(caller)) {
        for (const s of e.secrets) {
          if (s.hosts.some((p) => matchDomain(p, host))) {
            ops.push({ op: "substitute", placeholder: s.placeholder, value: s.value });
          }
        }
      }
      return ops;
    },
    secrets: () => entries().flatMap((e) => e.secrets.map((s) => s.value)),
  };
}

/** The egress secrets of every sandbox on the host, kept fresh from the files. */
export class EgressSecrets implements EgressLookup {
  readonly #dir: string;
  readonly #periodMs: number;
  #entries: EgressEntry[] = [];
  #lookup = egressLookup(() => this.#entries);
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  #stamp = "";
  #onChange: ((entries: readonly EgressEntry[]) => void) | undefined;

  /** Creates it (nothing runs until a start or a call). */
  constructor(opts: { dir: string; periodMs?: number }) {
    this.#dir = opts.dir;
    this.#periodMs = opts.periodMs ?? 2000;
  }

  /** Every current entry. */
  get entries(): readonly EgressEntry[] {
    return this.#entries;
  }

  /** Calls `fn` with every new set of entries (and once now). */
  watch(fn: (entries: readonly EgressEntry[]) => void): void {
    this.#onChange = fn;
    fn(this.#entries);
  }

  /** Reads the files now and then keeps re-reading. */
  async start(): Promise<void> {
    await this.reload();
    const tick = async () => {
      await this.reload();
      if (!this.#stopped) this.#timer = setTimeout(tick, this.#periodMs);
    };
    this.#timer = setTimeout(tick, this.#periodMs);
  }

  /** Stops re-reading. */
  close(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  /** Re-reads every `*\/secrets.json` when anything changed. */
  async reload(): Promise<void> {
    const found: { bridge: string; path: string; info: Deno.FileInfo }[] = [];
    try {
      for await (const d of Deno.readDir(this.#dir)) {
        if (!d.isDirectory || d.name.startsWith(".")) continue;
        const path = `${this.#dir}/${d.name}/secrets.json`;
        try {
          found.push({ bridge: d.name, path, info: await Deno.stat(path) });
        } catch { /* no secrets for this bridge */ }
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        log.warn("proxy: reading egress secrets failed", { error: String(e) });
      }
      if (this.#entries.length) this.#set([]);
      return;
    }
    const stamp = found.map((f) => `${f.path}@${f.info.mtime?.getTime()}:${f.info.size}`).sort()
      .join("|");
    if (stamp === this.#stamp) return;
    this.#stamp = stamp;
    const entries: EgressEntry[] = [];
    for (const f of found) {
      if ((f.info.mode ?? 0) & 0o077) {
        log.warn("proxy: skipping egress secrets readable by others", { path: f.path });
        continue;
      }
      try {
        entries.push(parseEgressFile(f.bridge, await Deno.readTextFile(f.path)));
      } catch (e) {
        log.warn("proxy: skipping egress secrets", { path: f.path, error: (e as Error).message });
      }
    }
    this.#set(entries);
  }

  #set(entries: EgressEntry[]): void {
    this.#entries = entries;
    this.#onChange?.(entries);
  }

  covers(caller: Caller, host: string): boolean {
    return this.#lookup.covers(caller, host);
  }

  ops(caller: Caller, host: string): HeaderOp[] {
    return this.#lookup.ops(caller, host);
  }

  secrets(): Secret[] {
    return this.#lookup.secrets();
  }
}
