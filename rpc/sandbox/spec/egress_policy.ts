/**
 * The egress policy (isb-rpc.md §13) a written `egress:` field means, without the schema that
 * reads it: the types, the host entries (`host:port`, `*.domain:port`) and `egressPolicy`,
 * which validates a spec into entries and secret bindings. Apart from `egress.ts` so the
 * engine (the egress names, the proxy's CA bindings) uses the policy without building the
 * spec's zod schemas, which `isb rpc` would otherwise pay before its first answer
 * (docs/decisions.md, "The spec's schemas only where a spec is read"). Pure.
 *
 * @module
 */

import { invalid } from "../../errors.ts";

/** A secret as written, normalised: the env var the guest sees, its store name, its hosts. */
export interface EgressSecretSpec {
  /** The environment variable that holds the placeholder in the guest. */
  env: string;
  /** The name of the real value in the secret store (default: `env`). */
  secret?: string;
  /** The hosts (`host[:port]`, `*.suffix`) whose requests get the real value. */
  hosts: string[];
}

/** `egress:` normalised to its serialised form: `"none"`, a host list, or allow + secrets. */
export type EgressSpec = "none" | string[] | { allow: string[]; secrets: EgressSecretSpec[] };

/** One allowed `host:port` (a `*.` suffix covers subdomains only). */
export interface EgressEntry {
  /** The host, lower-cased (without the `*.` of a suffix). */
  host: string;
  /** Whether the entry was `*.host`: subdomains only. */
  suffix: boolean;
  /** The port (443 unless written). */
  port: number;
}

/** A secret bound to its hosts, with the placeholder the guest sees (once known). */
export interface SecretBinding {
  /** The environment variable the guest reads. */
  env: string;
  /** The name of the real value in the secret store. */
  secret: string;
  /** The hosts whose requests get the real value. */
  hosts: EgressEntry[];
  /** What the guest sees instead (empty until the bridge is known). */
  placeholder: string;
}

/** The validated policy: an empty `entries` list denies everything. */
export interface EgressPolicy {
  /** The allowed `host:port` entries. */
  entries: EgressEntry[];
  /** The secrets and the hosts they are injected for. */
  secrets: SecretBinding[];
}

/** Most entries a sandbox may carry. */
export const MAX_ENTRIES = 256;
/** Most secrets a sandbox may carry. */
export const MAX_SECRETS = 16;
/** The port an entry gets when it names none. */
export const DEFAULT_PORT = 443;

/** A hostname lower-cased and checked: DNS labels only, never an IP address. */
export function normalizeHost(raw: string): string {
  const h = raw.trim().replace(/\.+$/, "").toLowerCase();
  const q = JSON.stringify(raw);
  if (h === "" || h.length > 253) throw invalid(`egress host ${q}: not a hostname`);
  if (h.startsWith("[") || isIp(h)) {
    throw invalid(`egress host ${q}: egress is by hostname; an IP address cannot be allowed`);
  }
  for (const label of h.split(".")) {
    const ok = label !== "" && label.length <= 63 && !label.startsWith("-") &&
      !label.endsWith("-") && /^[a-z0-9_-]+$/.test(label);
    if (!ok) throw invalid(`egress host ${q}: ${JSON.stringify(label)} is not a valid DNS label`);
  }
  return h;
}

/**
 * True for anything libc or a URL parser would read as an address: a last label that is a
 * number (decimal, octal or `0x` hex: `127.1`, `2130706433`, `0x7f.1` are 127.0.0.1 to
 * `inet_aton`), or an IPv6 form.
 */
function isIp(h: string): boolean {
  if (/^(?:0x[0-9a-f]*|[0-9]+)$/.test(h.slice(h.lastIndexOf(".") + 1))) return true;
  return h.includes(":") && /^[0-9a-f:.]+$/.test(h);
}

/** Parses `host`, `host:port`, `*.suffix` or `*.suffix:port`. Throws `invalid`. */
export function parseEntry(raw: string): EgressEntry {
  const s = raw.trim();
  const colon = s.lastIndexOf(":");
  let host = s;
  let port = DEFAULT_PORT;
  if (colon >= 0) {
    const p = s.slice(colon + 1);
    const n = /^[0-9]+$/.test(p) ? Number(p) : NaN;
    if (!(n >= 1 && n <= 65535)) {
      throw invalid(`egress ${JSON.stringify(s)}: bad port ${JSON.stringify(p)}`);
    }
    host = s.slice(0, colon);
    port = n;
  }
  if (host.startsWith("*.")) {
    const d = normalizeHost(host.slice(2));
    if (!d.includes(".")) {
      throw invalid(
        `egress ${JSON.stringify(s)}: a wildcard needs a domain of at least two labels`,
      );
    }
    return { host: d, suffix: true, port };
  }
  if (host.includes("*")) {
    throw invalid(`egress ${JSON.stringify(s)}: \`*\` is only allowed as a leading \`*.\``);
  }
  return { host: normalizeHost(host), suffix: false, port };
}

/** `host:port` or `*.domain:port`. */
export function entryString(e: EgressEntry): string {
  return `${e.suffix ? "*." : ""}${e.host}:${e.port}`;
}

function compareEntries(a: EgressEntry, b: EgressEntry): number {
  if (a.suffix !== b.suffix) return a.suffix ? 1 : -1;
  if (a.host !== b.host) return a.host < b.host ? -1 : 1;
  return a.port - b.port;
}

function validEnvName(n: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(n) && n.length <= 128;
}

/** A valid secret store name: 1-128 of `[A-Za-z0-9_.-]`, not starting with `.`. */
export function validateSecretName(name: string): void {
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(name) || name.startsWith(".")) {
    throw invalid(
      `secret name ${JSON.stringify(name)}: 1-128 characters of [A-Za-z0-9_.-], ` +
        "not starting with '.'",
    );
  }
}

/**
 * Validates an egress spec into its policy (§13). `placeholder(env)` supplies each secret's
 * placeholder once the bridge is known; without it placeholders are empty. Throws `invalid`.
 */
export function egressPolicy(
  spec: EgressSpec,
  placeholder: (env: string) => string = () => "",
): EgressPolicy {
  const none = spec === "none";
  const allow = none ? [] : Array.isArray(spec) ? spec : spec.allow;
  const secretSpecs = none || Array.isArray(spec) ? [] : spec.secrets;
  const entries: EgressEntry[] = [];
  const add = (e: EgressEntry) => {
    if (!entries.some((x) => compareEntries(x, e) === 0)) entries.push(e);
  };
  for (const a of allow) add(parseEntry(a));
  const secrets: SecretBinding[] = [];
  for (const s of secretSpecs) {
    if (!validEnvName(s.env)) {
      throw invalid(
        `egress secret: ${JSON.stringify(s.env)} is not an environment variable name`,
      );
    }
    if (secrets.some((b) => b.env === s.env)) throw invalid(`egress secret ${s.env}: listed twice`);
    const store = s.secret ?? s.env;
    validateSecretName(store);
    if (s.hosts.length === 0 || s.hosts.every((h) => h === "")) {
      throw invalid(
        `egress secret ${s.env}: name the hosts it may be sent to (NAME@host1,host2)`,
      );
    }
    const hosts = s.hosts.map(parseEntry);
    hosts.forEach(add);
    secrets.push({ env: s.env, secret: store, hosts, placeholder: placeholder(s.env) });
  }
  if (secrets.length > MAX_SECRETS || entries.length > MAX_ENTRIES) {
    throw invalid(
      `egress: at most ${MAX_ENTRIES} hosts and ${MAX_SECRETS} secrets per sandbox`,
    );
  }
  return { entries: entries.sort(compareEntries), secrets };
}
