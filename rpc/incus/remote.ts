/**
 * Incus remotes as the `incus` CLI knows them, so `--remote NAME` means here what it means
 * to `incus`: the client's own `config.yml` (`$INCUS_CONF`, else `~/.config/incus`) names
 * each remote's `addr` and `protocol`, the client identity is `client.crt`/`client.key`
 * beside it, and the server certificate it pinned at `incus remote add` is
 * `servercerts/<name>.crt`. An explicit `https://HOST:PORT` works too, with the same client
 * identity and the server certificate of a configured remote at that address (else the
 * system roots). Why reuse the CLI's files rather than flags of our own: a user who can run
 * `incus --remote NAME list` can run `isx --remote NAME list` with nothing new to set up,
 * and trust stays managed by `incus remote add` / `incus config trust add`.
 *
 * Pure: files come through an injected reader, so every error (unknown remote, missing
 * certificate, an image server named as a daemon) is tested without a home directory.
 *
 * @module
 */

import { IsbError } from "../errors.ts";
import { parseYaml } from "../yaml.ts";
import type { TlsIdentity } from "./http.ts";
import type { ServerInfo } from "./types.ts";

/** Where incusd is: the local socket, or HTTPS with a client identity. */
export type IncusEndpoint = { socket: string } | { url: string; tls: TlsIdentity };

/** One remote of the `incus` client's config.yml. */
export interface IncusRemote {
  /** `https://host:port`, `unix://` or `unix:///path`. */
  addr: string;
  /** `incus` (a daemon) or `simplestreams`/`oci` (image servers). */
  protocol: string;
  /** The remote's default project (`project:`), as `incus` uses it when no `--project`. */
  project?: string;
}

/** Reads a file's text; `undefined` when it does not exist. */
export type ReadText = (path: string) => string | undefined;

/** Options of {@link resolveRemote}. */
export interface ResolveRemoteOptions {
  /** The incus client config directory (`$INCUS_CONF`, else `~/.config/incus`). */
  confDir: string;
  /** The socket `unix://` means (the `--socket` default). */
  socket: string;
  /** File reader (the only I/O). */
  read: ReadText;
}

/** Parses config.yml's `remotes:`; a malformed file is `parse`. */
export function parseRemotes(text: string, file: string): Record<string, IncusRemote> {
  if (!text.trim()) return {};
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new IsbError("parse", `read Incus client config ${file}: ${(e as Error).message}`);
  }
  const raw = (doc as { remotes?: unknown } | null)?.remotes;
  const out: Record<string, IncusRemote> = {};
  if (raw === undefined || raw === null) return out;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw new IsbError("parse", `read Incus client config ${file}: "remotes" is not a map`);
  }
  for (const [name, r] of Object.entries(raw as Record<string, unknown>)) {
    const o = (r ?? {}) as Record<string, unknown>;
    out[name] = {
      addr: typeof o.addr === "string" ? o.addr : "",
      protocol: typeof o.protocol === "string" ? o.protocol : "incus",
      ...(typeof o.project === "string" && o.project ? { project: o.project } : {}),
    };
  }
  return out;
}

/**
 * The endpoint `remote` (a name from config.yml, or an `https://` URL) stands for, with the
 * remote's default project when config.yml names one other than `default`.
 */
export function resolveRemote(
  remote: string,
  opts: ResolveRemoteOptions,
): IncusEndpoint & { project?: string } {
  const file = `${opts.confDir}/config.yml`;
  const text = opts.read(file);
  const remotes = text === undefined ? {} : parseRemotes(text, file);
  if (/^https:\/\//i.test(remote)) {
    const url = normalizeUrl(remote);
    const known = Object.entries(remotes).find(([, r]) => normalizeUrl(r.addr) === url);
    return httpsEndpoint(url, known?.[0], opts);
  }
  if (remote === "local" && !remotes.local) return { socket: opts.socket };
  const r = remotes[remote];
  if (!r) {
    const names = Object.entries(remotes).filter(([, x]) => x.protocol === "incus")
      .map(([n]) => n);
    const where = text === undefined ? `there is no ${file}` : `it is not in ${file}`;
    throw new IsbError(
      "invalid",
      `unknown Incus remote "${remote}": ${where}` +
        (names.length ? ` (known: ${names.join(", ")})` : "") +
        `; add it with \`incus remote add ${remote} https://HOST:8443\`, or pass an https:// URL`,
      { data: { remote } },
    );
  }
  if (r.protocol !== "incus") {
    throw new IsbError(
      "invalid",
      `Incus remote "${remote}" is an image server (protocol ${r.protocol}), not an Incus daemon`,
      { data: { remote } },
    );
  }
  if (/^unix:\/\//.test(r.addr)) {
    const path = r.addr.slice("unix://".length);
    return { socket: path || opts.socket };
  }
  if (!/^https:\/\//i.test(r.addr)) {
    throw new IsbError(
      "invalid",
      `Incus remote "${remote}" has an address isx cannot use: "${r.addr}" (https:// or unix://)`,
      { data: { remote } },
    );
  }
  const project = r.project && r.project !== "default" ? { project: r.project } : {};
  return { ...httpsEndpoint(normalizeUrl(r.addr), remote, opts), ...project };
}

function httpsEndpoint(url: string, name: string | undefined, opts: ResolveRemoteOptions) {
  const who = name ? `Incus remote "${name}"` : `Incus at ${url}`;
  const need = (file: string) => {
    const path = `${opts.confDir}/${file}`;
    const v = opts.read(path);
    if (v === undefined || !v.trim()) {
      throw new IsbError(
        "invalid",
        `${who}: no client certificate: ${path} is missing; create one with ` +
          "`incus remote generate-certificate` (or `incus remote add`), then trust it on the " +
          "server with `incus config trust add-certificate`",
        { data: { remote: name ?? url, file: path } },
      );
    }
    return v;
  };
  const cert = need("client.crt");
  const key = need("client.key");
  const server = name ? opts.read(`${opts.confDir}/servercerts/${name}.crt`) : undefined;
  const tls: TlsIdentity = { cert, key, ...(server?.trim() ? { caCerts: [server] } : {}) };
  return { url, tls };
}

/** `https://host:port` without a trailing slash; the Incus port 8443 when none is given. */
export function normalizeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}:${u.port || "8443"}`;
  } catch {
    throw new IsbError("invalid", `Incus remote URL "${url}" is not a URL (https://HOST:PORT)`);
  }
}

/** What {@link checkRemote} needs of a client. */
export interface RemoteProbe {
  /** The socket path or URL, as messages show it. */
  readonly where: string;
  /** `GET /1.0`. */
  serverInfo(): Promise<ServerInfo>;
}

/**
 * One `GET /1.0` before a command runs over a remote or with a target: an untrusted client,
 * an unverifiable server and a target outside a cluster each fail here with what to run,
 * instead of as a 403 or a TLS error in the middle of the work.
 */
export async function checkRemote(
  client: RemoteProbe,
  opts: { remote?: string; target?: string },
): Promise<ServerInfo> {
  const name = opts.remote ?? "local";
  let info: ServerInfo;
  try {
    info = await client.serverInfo();
  } catch (e) {
    if (
      e instanceof IsbError && e.code === "connect" && /certificate|tls|handshake/i.test(e.message)
    ) {
      throw new IsbError(
        "connect",
        `${e.message}; the server's certificate is not the one the incus client trusts for ` +
          `"${name}": run \`incus remote add ${name} ${client.where}\` (it records the certificate ` +
          "in servercerts/), or check that the address is the server's",
        { ...(e.data ? { data: e.data } : {}), cause: e },
      );
    }
    throw e;
  }
  if (info.auth !== "trusted") {
    throw new IsbError(
      "forbidden",
      `incusd at ${client.where} does not trust this client's certificate: on the server run ` +
        "`incus config trust add-certificate <client.crt>`, or `incus config trust add NAME` " +
        `and here \`incus remote add ${name} ${client.where} --token TOKEN\``,
      { data: { remote: name } },
    );
  }
  if (opts.target && !info.environment.server_clustered) {
    throw new IsbError(
      "invalid",
      `--target ${opts.target}: incusd at ${client.where} is not a cluster member; ` +
        "drop --target, or point --remote at a cluster",
      { data: { target: opts.target } },
    );
  }
  return info;
}
