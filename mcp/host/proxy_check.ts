/**
 * What the host layer knows of the running proxy, read from its ops port: `/health` (as a
 * client reads any wire format: parsed, unknown fields ignored) and `/ca.crt`. The judgements
 * on top are pure: whether the proxy's build drifted from this program's
 * ({@link versionDrift}; shared/spec/isx-mcp.md §7.H), and which of the six states of
 * `isx proxy status` the host is in ({@link classifyProxy}).
 *
 * The host layer never imports the proxy (architecture.md §3), so the `/health` shape is
 * repeated here as the wire contract it is.
 *
 * @module
 */

import { pemToDer } from "../../rpc/base.ts";
import { readResponse } from "../../rpc/incus/http_unix.ts";

/** The `/health` body as clients read it (fields of older proxies may be missing). */
export interface ProxyHealth {
  /** Program version (absent: a legacy proxy). */
  version?: string | undefined;
  /** The build's commit, when known. */
  gitSha?: string | null | undefined;
  /** Runtime and version. */
  runtime?: string | undefined;
  /** Process id. */
  pid: number;
  /** Fingerprint of the CA it signs with. */
  caFingerprint: string;
  /** Whether the bridge DNS points at it now. */
  dnsConfigured?: boolean | undefined;
  /** Whether it manages the bridge DNS at all. */
  dnsManaged?: boolean | undefined;
  /** Whether its config files changed since start. */
  configDrifted?: boolean | undefined;
  /** Which ones. */
  configDriftedFiles?: string[] | undefined;
  /** What is wrong with the credentials file now. */
  authError?: string | null | undefined;
  /** Namespaces with no credential. */
  missingCredentials?: string[] | undefined;
  /** Where it runs from. */
  programDir?: string | null | undefined;
  /** What it needs that does not hold yet (retried with backoff); absent: an older proxy. */
  converging?: { need: string; error: string; attempts?: number }[] | undefined;
  /** Its listen addresses. */
  listen?: { tls?: string | undefined; forward?: string | undefined } | undefined;
  /** Present on a proxy that reloads its credentials live (no restart for a new key). */
  credentials?: ProxyCredentials | undefined;
}

/** `/health`'s `credentials`: the live reload and each command source, never a value. */
export interface ProxyCredentials {
  /** Reloads applied since start. */
  reloads?: number | undefined;
  /** Why the files as they are now were not applied (the previous credentials stay). */
  error?: string | null | undefined;
  /** Since when (epoch ms). */
  errorSince?: number | null | undefined;
  /** Each command-sourced credential. */
  sources?: {
    program: string;
    state: string;
    ttlMs?: number;
    runs?: number;
    expiresAt?: number | null;
    failingSince?: number | null;
    error?: string | null;
  }[] | undefined;
}

type Check = (v: unknown) => boolean;
const str: Check = (v) => typeof v === "string";
const bool: Check = (v) => typeof v === "boolean";
const strs: Check = (v) => Array.isArray(v) && v.every(str);
const obj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
/** Each known field's check (absent always passes; `null` only where listed). */
const FIELDS: Record<string, [Check, "nullable"?]> = {
  version: [str],
  gitSha: [str, "nullable"],
  runtime: [str],
  pid: [(v) => typeof v === "number"],
  caFingerprint: [str],
  dnsConfigured: [bool],
  dnsManaged: [bool],
  configDrifted: [bool],
  configDriftedFiles: [strs],
  authError: [str, "nullable"],
  missingCredentials: [strs],
  programDir: [str, "nullable"],
  converging: [(v) => Array.isArray(v) && v.every((x) => obj(x) && str(x.need) && str(x.error))],
  listen: [(v) => obj(v) && [v.tls, v.forward].every((x) => x === undefined || str(x))],
  credentials: [(v) =>
    obj(v) && (v.error === undefined || v.error === null || str(v.error)) &&
    (v.sources === undefined ||
      (Array.isArray(v.sources) && v.sources.every((x) => obj(x) && str(x.program))))],
};

/**
 * The `/health` body, or undefined when it is not one: `pid` and `caFingerprint` present,
 * every known field of its type, unknown fields kept (a newer proxy may add some). A check
 * by hand, not zod: `isx list` reads it, and zod cost that command most of its start-up.
 */
export function healthOf(v: unknown): ProxyHealth | undefined {
  if (!obj(v) || v.pid === undefined || v.caFingerprint === undefined) return undefined;
  for (const [key, [check, nullable]] of Object.entries(FIELDS)) {
    const x = v[key];
    if (x === undefined || (x === null && nullable)) continue;
    if (!check(x)) return undefined;
  }
  return v as unknown as ProxyHealth;
}

/** A response of the ops port: its status and its body as text. */
interface OpsAnswer {
  status: number;
  text: string;
}

/**
 * One GET of the proxy's ops port (plain HTTP, `url` as `proxyHealthUrl` makes it) on a
 * connection of its own, read with the Incus client's HTTP/1.1 reader, within `ms`. Not
 * `fetch`: its first use in a process loads Deno's fetch extension, ~9 ms of a 110 ms
 * `isx list` before the request is even sent (docs/decisions.md, "The proxy's /health without
 * fetch"). Throws on anything but a whole HTTP response.
 */
async function opsGet(url: string, path: string, ms: number): Promise<OpsAnswer> {
  const u = new URL(url);
  if (u.protocol !== "http:") throw new TypeError(`the ops port is plain HTTP, not ${u.protocol}`);
  const hostname = u.hostname.replace(/^\[(.*)\]$/, "$1");
  const conn = await Deno.connect({ hostname, port: Number(u.port || 80) });
  const signal = AbortSignal.timeout(ms);
  const close = () => {
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  signal.addEventListener("abort", close, { once: true });
  try {
    const head = `GET ${path} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: close\r\n\r\n`;
    const bytes = new TextEncoder().encode(head);
    for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
    const res = await readResponse(conn);
    return { status: res.status, text: new TextDecoder().decode(res.body) };
  } finally {
    signal.removeEventListener("abort", close);
    close();
  }
}

/** What a read of `/health` found. */
export type HealthRead =
  | { kind: "ok"; health: ProxyHealth }
  | { kind: "down" }
  | { kind: "foreign"; detail: string };

/** Reads `/health` (2 s timeout): down when nothing answers, foreign when not isx's. */
export async function readProxyHealth(url: string): Promise<HealthRead> {
  let res: OpsAnswer;
  try {
    res = await opsGet(url, "/health", 2000);
  } catch {
    return { kind: "down" };
  }
  const text = res.text;
  if (res.status !== 200) return { kind: "foreign", detail: `HTTP ${res.status}` };
  try {
    const health = healthOf(JSON.parse(text));
    if (health) return { kind: "ok", health };
    return { kind: "foreign", detail: "not an isx proxy /health body" };
  } catch {
    return { kind: "foreign", detail: "not JSON" };
  }
}

/** Reads the CA certificate (PEM) the proxy signs with, from `/ca.crt`. */
export async function readServedCa(url: string): Promise<string | undefined> {
  try {
    const { status, text } = await opsGet(url, "/ca.crt", 2000);
    return status === 200 && text.includes("BEGIN CERTIFICATE") ? text : undefined;
  } catch {
    return undefined;
  }
}

/** SHA-256 fingerprint of a PEM certificate, in the proxy's format (`AB:CD:…`). */
export async function pemFingerprint(pem: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", pemToDer(pem)));
  return Array.from(d, (x) => x.toString(16).padStart(2, "0").toUpperCase()).join(":");
}

/** This program's build, to compare with the proxy's. */
export interface OwnBuild {
  /** VERSION. */
  version: string;
  /** The commit the launcher found (`ISX_GIT_SHA`), if any. */
  gitSha: string | null;
  /** Where this program lives. */
  programDir: string;
}

/** How the proxy's build compares with this program's. */
export type Drift =
  | { kind: "none" }
  | { kind: "legacy"; detail: string }
  | { kind: "restart"; detail: string }
  | { kind: "futile"; detail: string };

function short(sha: string | null | undefined): string {
  return sha ? sha.slice(0, 12) : "unknown commit";
}

/**
 * Version drift (pure): a proxy of another version or commit is stale ("restart
 * recommended"), unless it runs from another program directory, where a restart runs
 * that build again (futile: reinstall from here, or use that build's isx).
 */
export function versionDrift(h: ProxyHealth, own: OwnBuild): Drift {
  if (h.version === undefined) {
    return { kind: "legacy", detail: "the proxy predates version reporting" };
  }
  const commits = h.gitSha && own.gitSha && h.gitSha !== own.gitSha;
  if (h.version === own.version && !commits) return { kind: "none" };
  const what = `the proxy runs ${h.version} (${short(h.gitSha)}), this isx is ${own.version} ` +
    `(${short(own.gitSha)})`;
  if (h.programDir && h.programDir !== own.programDir) {
    return {
      kind: "futile",
      detail: `${what}; it runs from ${h.programDir}, so a restart runs that build again`,
    };
  }
  return { kind: "restart", detail: `${what}: restart recommended (isx proxy restart)` };
}

/** The states of `isx proxy status` (the spec's six, and `converging`). */
export const PROXY_STATES = [
  "running",
  "waiting_for_dns",
  "converging",
  "not_running",
  "stale_dns",
  "stale_gateway",
  "unknown",
] as const;
/** One of {@link PROXY_STATES}. */
export type ProxyState = typeof PROXY_STATES[number];

/** Exit status per state: 0 usable, 1 not running, 2 needs action, 3 unknown. */
export const PROXY_STATE_EXIT: Record<ProxyState, number> = {
  running: 0,
  not_running: 1,
  waiting_for_dns: 2,
  converging: 2,
  stale_dns: 2,
  stale_gateway: 2,
  unknown: 3,
};

/** What {@link classifyProxy} looks at. */
export interface ProxyFacts {
  /** The `/health` read. */
  read: HealthRead;
  /** Whether config.yaml asks the proxy to manage the bridge DNS. */
  dnsManaged: boolean;
  /** The bridge's gateway now (`undefined`: unknown, e.g. Incus down). */
  bridgeGateway?: string | undefined;
  /** The gateway config.yaml pins (`proxy.gateway`), if any. */
  pinnedGateway?: string | undefined;
  /** Where the bridge DNS sends intercepted names now (`undefined`: nowhere, or unknown). */
  dnsBlockGateway?: string | undefined;
}

/** The state and a line saying why and what to do (pure). */
export function classifyProxy(f: ProxyFacts): { state: ProxyState; why: string } {
  if (f.read.kind === "foreign") {
    return {
      state: "unknown",
      why: `something answers, but not like isx proxy (${f.read.detail})`,
    };
  }
  if (f.read.kind === "down") {
    if (f.dnsManaged && f.dnsBlockGateway) {
      return {
        state: "stale_dns",
        why: `the bridge DNS still sends intercepted names to ${f.dnsBlockGateway}, where ` +
          "nothing answers: instances' calls fail; isx proxy start",
      };
    }
    return { state: "not_running", why: "isx proxy start" };
  }
  const h = f.read.health;
  const listening = h.listen?.tls?.replace(/:\d+$/, "");
  const want = f.pinnedGateway ?? f.bridgeGateway;
  if (listening && want && listening !== want) {
    return {
      state: "stale_gateway",
      why: `it listens on ${listening}, but the gateway is now ${want}: isx proxy restart`,
    };
  }
  const pending = h.converging ?? [];
  const dns = pending.find((p) => p.need === "dns");
  if (f.dnsManaged && (h.dnsConfigured === false || dns)) {
    return {
      state: "waiting_for_dns",
      why: dns
        ? `the bridge DNS does not point at it yet, retrying (${dns.error}); see isx proxy logs`
        : "the bridge DNS does not point at it yet (see isx proxy logs; isx proxy restart)",
    };
  }
  if (pending.length) {
    return {
      state: "converging",
      why: `retrying what it needs: ${pending.map((p) => `${p.need} (${p.error})`).join("; ")}; ` +
        "see isx proxy logs",
    };
  }
  return { state: "running", why: "" };
}
