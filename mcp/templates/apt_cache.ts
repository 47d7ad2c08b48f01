/**
 * The host-side cache of Debian packages (`<cacheDir>/downloads/apt/`): the .deb files apt
 * downloaded inside one build are pulled back after its install and pushed into the next
 * build's `/var/cache/apt/archives/`, so it does not fetch them again. Each file is checked
 * against the SHA-256 the pushing build's apt expects (from its signed indices) before it is
 * pushed, and before it is cached: a file changed in the cache, or handed back changed by a
 * build whose scripts ran as root, is never installed by a later build. Entries are written
 * through a temporary name and a rename.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** Where cached Debian packages live. */
export function aptCacheDir(cacheDir: string): string {
  return `${cacheDir}/downloads/apt`;
}

/** One .deb apt would download: its file name and the SHA-256 apt expects (lower-case hex). */
export interface DebEntry {
  /** The file name under `/var/cache/apt/archives/`. */
  name: string;
  /** From the `SHA256:` field; absent when apt printed another kind of hash. */
  sha256?: string;
}

/** The .deb files apt would download, from `apt-get --print-uris` output. */
export function parsePrintUris(out: string): DebEntry[] {
  const debs: DebEntry[] = [];
  for (const line of out.split("\n")) {
    const m = /^'[^']+'\s+(\S+\.deb)\s+\d+(?:\s+(\S+))?/.exec(line);
    if (!m || !/^[A-Za-z0-9_.+~%:-]+$/.test(m[1]!)) continue;
    const sha = /^SHA256:([0-9a-fA-F]{64})$/.exec(m[2] ?? "")?.[1];
    debs.push(sha ? { name: m[1]!, sha256: sha.toLowerCase() } : { name: m[1]! });
  }
  return debs;
}

/**
 * `apt-get download --print-uris` arguments for the entries without a SHA-256 (`apt-get
 * install --print-uris` prints MD5 or nothing on Debian 12; `download` prints SHA-256):
 * `name:arch=version` from each file name `name_version_arch.deb`.
 */
export function downloadArgs(debs: readonly DebEntry[]): string[] {
  const out: string[] = [];
  for (const d of debs) {
    if (d.sha256) continue;
    const m = /^([a-z0-9][a-z0-9.+-]*)_([^_]+)_([a-z0-9-]+)\.deb$/.exec(d.name);
    if (!m) continue;
    const version = m[2]!.replace(/%3a/gi, ":").replace(/%2b/gi, "+").replace(/%7e/gi, "~");
    if (!/^[A-Za-z0-9.+~:-]+$/.test(version)) continue;
    out.push(m[3] === "all" ? `${m[1]}=${version}` : `${m[1]}:${m[3]}=${version}`);
  }
  return out;
}

/** `debs` with the SHA-256 of `apt-get download --print-uris` output filled in by file name. */
export function withHashes(debs: readonly DebEntry[], downloadOut: string): DebEntry[] {
  const known = new Map(parsePrintUris(downloadOut).map((d) => [d.name, d.sha256]));
  return debs.map((d) => {
    const sha256 = d.sha256 ?? known.get(d.name);
    return sha256 ? { name: d.name, sha256 } : { name: d.name };
  });
}

async function sha256Hex(data: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The cached copy of `deb`, checked against the SHA-256 apt expects before it is pushed into
 * a build; undefined when not cached or when apt gave no SHA-256 (then apt downloads it). A
 * copy that does not match is removed from the cache and fails the step.
 */
export async function readCachedDeb(dir: string, deb: DebEntry): Promise<Uint8Array | undefined> {
  if (!deb.sha256) return undefined;
  const path = `${dir}/${deb.name}`;
  let data: Uint8Array;
  try {
    data = await Deno.readFile(path);
  } catch {
    return undefined;
  }
  const got = await sha256Hex(data);
  if (got === deb.sha256) return data;
  await Deno.remove(path).catch(() => {});
  throw new IsbError(
    "operation_failed",
    `cached package ${deb.name} does not match the SHA-256 apt expects (want ${deb.sha256}, ` +
      `got ${got}): removed ${path} from the host cache; run the build again to download it`,
  );
}

/**
 * Caches `data` (pulled back from a build) as `deb` if it matches the SHA-256 apt expects,
 * through a temporary name and a rename; a copy that does not match is not cached and fails
 * the step (the build instance handed back something else than apt verified).
 */
export async function storeDeb(dir: string, deb: DebEntry, data: Uint8Array): Promise<boolean> {
  if (!deb.sha256) return false;
  const got = await sha256Hex(data);
  if (got !== deb.sha256) {
    throw new IsbError(
      "operation_failed",
      `package ${deb.name} pulled back from the build instance does not match the SHA-256 apt ` +
        `expects (want ${deb.sha256}, got ${got}): not cached`,
    );
  }
  const tmp = `${dir}/.${deb.name}.${crypto.randomUUID().slice(0, 8)}`;
  await Deno.writeFile(tmp, data);
  await Deno.rename(tmp, `${dir}/${deb.name}`);
  return true;
}
