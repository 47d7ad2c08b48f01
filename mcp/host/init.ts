/**
 * `isx init`: one-time host set-up, safe to repeat. Creates the config directory with
 * `config.yaml`, `templates/`, `tools/` and a `credentials.yaml` skeleton (mode 0600), and
 * the state directory with `build/`; then checks that Incus answers and that what the
 * built-in templates need is there (a copy-on-write pool, the bridge, the base image),
 * saying how to fix what is not. A file that exists is never touched: a person may have
 * written it. The proxy CA is made by the caller (`ensureCa` lives in `proxy/`).
 *
 * @module
 */

import { type IncusClient, isNotFound } from "../../rpc/base.ts";
import { CONFIG_TEMPLATE, CREDENTIALS_TEMPLATE, DEFAULT_BRIDGE } from "./config.ts";

/** One thing init did or found. */
export interface InitStep {
  /** What it concerns: a path, or "incus". */
  what: string;
  /** What happened. */
  outcome: "created" | "kept" | "ok" | "warning" | "error";
  /** Details or how to fix it. */
  note?: string;
}

/** Where init writes. */
export interface InitDirs {
  /** The config directory. */
  configDir: string;
  /** The state directory. */
  stateDir: string;
}

/** Options of {@link initHost}. */
export interface InitOptions {
  /** The Incus client to check. */
  client: IncusClient;
  /** The bridge the proxy will use (default incusbr0). */
  bridge?: string;
  /** The image the built-in root template starts from. */
  image?: string;
}

function ensureDir(path: string, mode: number, steps: InitStep[]): void {
  try {
    Deno.statSync(path);
    steps.push({ what: path, outcome: "kept" });
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    Deno.mkdirSync(path, { recursive: true, mode });
    steps.push({ what: path, outcome: "created" });
  }
}

function ensureFile(path: string, text: string, mode: number, steps: InitStep[]): void {
  try {
    Deno.writeTextFileSync(path, text, { createNew: true, mode });
    Deno.chmodSync(path, mode); // the umask may have narrowed or widened nothing; be exact
    steps.push({ what: path, outcome: "created" });
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    steps.push({ what: path, outcome: "kept", note: "exists; left as it is" });
  }
}

/** Creates what is missing and checks the host; never overwrites a file. */
export async function initHost(dirs: InitDirs, opts: InitOptions): Promise<InitStep[]> {
  const steps: InitStep[] = [];
  ensureDir(dirs.configDir, 0o700, steps);
  ensureDir(`${dirs.configDir}/templates`, 0o755, steps);
  ensureDir(`${dirs.configDir}/tools`, 0o755, steps);
  ensureFile(`${dirs.configDir}/config.yaml`, CONFIG_TEMPLATE, 0o644, steps);
  const creds = `${dirs.configDir}/credentials.yaml`;
  ensureFile(creds, CREDENTIALS_TEMPLATE, 0o600, steps);
  const mode = (Deno.statSync(creds).mode ?? 0o600) & 0o777;
  if (mode & 0o077) {
    steps.push({
      what: creds,
      outcome: "warning",
      note: `mode 0${
        mode.toString(8)
      } lets other users read it; the proxy refuses it: run chmod 600 "${creds}"`,
    });
  }
  ensureDir(dirs.stateDir, 0o700, steps);
  ensureDir(`${dirs.stateDir}/build`, 0o755, steps);
  steps.push(...await checkIncus(opts));
  return steps;
}

/** Checks Incus and what templates need; each finding says how to fix it. */
export async function checkIncus(opts: InitOptions): Promise<InitStep[]> {
  const c = opts.client;
  const steps: InitStep[] = [];
  let pools;
  try {
    pools = await c.listStoragePools();
  } catch (e) {
    steps.push({
      what: "incus",
      outcome: "error",
      note: `Incus does not answer at ${c.where}: ${(e as Error).message}. ` +
        "Install and start Incus (as root: scripts/host-setup.sh), make its socket reachable " +
        "(add your user to the incus-admin group and log in again), or name another socket " +
        "with --socket or INCUS_SOCKET",
    });
    return steps;
  }
  let version = "";
  try {
    // GET /1.0 can be slow on a busy daemon; the version is only informative
    const r = await c.call("GET", "/1.0", { timeoutMs: 5000 });
    const env = (r.kind === "sync" ? r.metadata : undefined) as
      | { environment?: { server_version?: string } }
      | undefined;
    version = env?.environment?.server_version ? ` ${env.environment.server_version}` : "";
  } catch { /* informative only */ }
  steps.push({ what: "incus", outcome: "ok", note: `Incus${version} answers at ${c.where}` });
  {
    const cow = pools.filter((p) => ["btrfs", "zfs", "lvm", "lvmcluster"].includes(p.driver));
    steps.push(
      cow.length
        ? {
          what: "storage",
          outcome: "ok",
          note: `copy-on-write pool ${cow[0]!.name} (${cow[0]!.driver})`,
        }
        : {
          what: "storage",
          outcome: "warning",
          note: "no btrfs/zfs/lvm storage pool: every branch is a full copy (seconds, not " +
            "milliseconds); create one, e.g. incus storage create default btrfs",
        },
    );
  }
  const bridge = opts.bridge ?? DEFAULT_BRIDGE;
  try {
    const net = (await c.getNetwork(bridge)).value;
    const addr = net.config["ipv4.address"];
    steps.push(
      addr && addr !== "none"
        ? { what: "network", outcome: "ok", note: `bridge ${bridge} at ${addr}` }
        : { what: "network", outcome: "warning", note: `bridge ${bridge} has no IPv4 address` },
    );
  } catch (e) {
    steps.push({
      what: "network",
      outcome: "warning",
      note: isNotFound(e)
        ? `no network "${bridge}": create it (incus network create ${bridge}) or set proxy.bridge in config.yaml`
        : (e as Error).message,
    });
  }
  const image = opts.image ?? "debian-base";
  try {
    await c.getImageAlias(image);
    steps.push({ what: "image", outcome: "ok", note: `image ${image} is present` });
  } catch (e) {
    steps.push({
      what: "image",
      outcome: "warning",
      note: isNotFound(e)
        ? `no image alias "${image}" (the built-in templates start from it): build it with scripts/host-setup.sh`
        : (e as Error).message,
    });
  }
  return steps;
}
