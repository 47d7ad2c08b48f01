/**
 * Live reload of the credentials: the proxy looks at credentials.yaml and config.yaml every
 * {@link RELOAD_POLL_MS} and, when either changed (content or mode), reads and applies them
 * without a restart (`apply`, built by proxy/host/_host.ts: a new {@link Policy} generation,
 * commands no longer named forgotten). Requests already admitted keep the head they were
 * given, so a stream in flight finishes with the credential it started with; counters are
 * not touched. A file that does not parse, or is readable by others than its owner, is not
 * applied: the credentials in force stay, and {@link LiveReload.state} says why (never a
 * value: the messages of loadCredentials and parseProxyConfig name fields, not values)
 * until a later change applies.
 *
 * Polling rather than `Deno.watchFs`: the files are a few hundred bytes, editors replace
 * them by rename (which a watch on the file itself misses), and a poll needs no watch on
 * the whole config directory; two small reads every half second meet the 2 s promise with
 * room to spare. The clock and the timer are injected, so tests call {@link
 * LiveReload.check} instead of waiting.
 *
 * @module
 */

import { log } from "../../rpc/base.ts";
import { allCommands, loadCredentials } from "./credentials.ts";
import { loadProxyConfig, type ProxyConfig } from "./host_config.ts";
import type { Policy, PolicyConfig } from "./policy.ts";
import type { CommandSources } from "./command_source.ts";

/** How often the files are looked at (ms). */
export const RELOAD_POLL_MS = 500;

/** What `/health` says of the reload. */
export interface ReloadState {
  /** When the credentials in force were read (epoch ms). */
  appliedAt: number;
  /** Reloads applied since start. */
  reloads: number;
  /** Why the files as they are now were not applied (the previous ones are in force). */
  error: string | null;
  /** Since when they have not applied (epoch ms). */
  errorSince: number | null;
}

async function fingerprint(path: string): Promise<string> {
  try {
    const [info, bytes] = await Promise.all([Deno.stat(path), Deno.readFile(path)]);
    const d = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    return `${(info.mode ?? 0) & 0o7777}:${Array.from(d, (x) => x.toString(16)).join("")}`;
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "missing" : `unreadable: ${(e as Error).name}`;
  }
}

/** Watches files and applies them when they change. */
export class LiveReload {
  readonly #files: readonly string[];
  readonly #apply: () => Promise<void>;
  readonly #now: () => number;
  #seen = "";
  #state: ReloadState;
  #timer: ReturnType<typeof setInterval> | undefined;
  #checking: Promise<boolean> | undefined;

  /** Watches `files` (read as they are now: what is in force); call {@link LiveReload.start}. */
  private constructor(files: readonly string[], apply: () => Promise<void>, now: () => number) {
    this.#files = files;
    this.#apply = apply;
    this.#now = now;
    this.#state = { appliedAt: now(), reloads: 0, error: null, errorSince: null };
  }

  /**
   * Takes the files' fingerprints now (the caller just read them) and, unless
   * `intervalMs` is 0, checks them on a timer.
   */
  static async start(o: {
    files: readonly string[];
    apply: () => Promise<void>;
    now?: () => number;
    intervalMs?: number;
  }): Promise<LiveReload> {
    const r = new LiveReload(o.files, o.apply, o.now ?? Date.now);
    r.#seen = await r.#fingerprints();
    const ms = o.intervalMs ?? RELOAD_POLL_MS;
    if (ms > 0) r.#timer = setInterval(() => void r.check(), ms);
    return r;
  }

  async #fingerprints(): Promise<string> {
    return (await Promise.all(this.#files.map(fingerprint))).join("|");
  }

  /** Looks once; true when a change was applied (one check at a time). */
  check(): Promise<boolean> {
    this.#checking ??= this.#check().finally(() => (this.#checking = undefined));
    return this.#checking;
  }

  async #check(): Promise<boolean> {
    const now = await this.#fingerprints();
    if (now === this.#seen) return false;
    this.#seen = now;
    try {
      await this.#apply();
    } catch (e) {
      const message = (e as Error).message;
      this.#state = {
        ...this.#state,
        error: message,
        errorSince: this.#state.errorSince ?? this.#now(),
      };
      log.warn("proxy: credentials not reloaded; the previous ones stay in force", {
        error: message,
      });
      return false;
    }
    this.#state = {
      appliedAt: this.#now(),
      reloads: this.#state.reloads + 1,
      error: null,
      errorSince: null,
    };
    log.info("proxy: credentials reloaded", { reloads: this.#state.reloads });
    return true;
  }

  /** What `/health` reports. */
  state(): ReloadState {
    return { ...this.#state };
  }

  /** Stops looking. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#checking;
  }
}

/**
 * Reloads `credentials.yaml` and the `proxy:` block of `config.yaml` into `policy` when
 * they change: a new generation for new requests, commands no longer named forgotten by
 * `sources`, `onDnsChange` called when the intercepted names changed.
 */
export function watchCredentials(o: {
  credentialsPath: string;
  configPath: string;
  policy: Policy;
  sources: CommandSources;
  /** The policy's settings from a `proxy:` block (tools' rules are the caller's). */
  policyConfig: (c: ProxyConfig) => PolicyConfig;
  onDnsChange?: () => Promise<void>;
  now?: () => number;
  intervalMs?: number;
}): Promise<LiveReload> {
  return LiveReload.start({
    files: [o.credentialsPath, o.configPath],
    apply: async () => {
      const creds = await loadCredentials(o.credentialsPath);
      const config = await loadProxyConfig(o.configPath);
      const dnsChanged = o.policy.update(creds, o.policyConfig(config));
      o.sources.retain(allCommands(creds));
      if (dnsChanged) await o.onDnsChange?.();
    },
    ...(o.now ? { now: o.now } : {}),
    ...(o.intervalMs !== undefined ? { intervalMs: o.intervalMs } : {}),
  });
}
