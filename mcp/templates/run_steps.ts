/**
 * Runs planned build steps inside a build instance: apt installs through the host's .deb
 * cache, npm packages fetched on the host and unpacked in the guest, this program for the
 * guest runner mode, files (pushed, then `install`ed with owner and mode), and scripts as
 * root or as agentuser with their output streamed.
 *
 * @module
 */

import { type IncusClient, IsbError } from "../../rpc/base.ts";
import { capture, type GuestUser, ROOT, runScript } from "../host/guest.ts";
import {
  aptCacheDir,
  type DebEntry,
  downloadArgs,
  parsePrintUris,
  readCachedDeb,
  storeDeb,
  withHashes,
} from "./apt_cache.ts";
import { fetchNpm, type HostTools } from "./cache.ts";
import { bundleProgram, GUEST_PROGRAM, launcherText, type ProgramSource } from "./program.ts";
import { AGENT_USER, type Step } from "./steps.ts";

/** Where build files are staged in the guest (removed when the build finishes). */
export const STAGING = "/var/tmp/isx-build";

/** What running steps needs. */
export interface StepContext {
  client: IncusClient;
  /** The build instance. */
  instance: string;
  cacheDir: string;
  host: HostTools;
  program?: ProgramSource;
  /** agentuser, once it exists. */
  agent?: GuestUser;
  /** Receives guest output lines. */
  onOutput: (line: string) => void;
}

const NPM_UNPACK = `
rm -rf "$ISX_DEST"; mkdir -p "$ISX_DEST"
if [ "$ISX_PACKED" = 1 ]; then
  tar -xzf "$ISX_TARBALL" -C "$ISX_DEST" --strip-components=1 --no-same-owner
else
  tar -xf "$ISX_TARBALL" -C "$ISX_DEST" --no-same-owner
fi
rm -f "$ISX_TARBALL"
pkgdir="$ISX_DEST/$ISX_PKGDIR"
printf '%s\\n' "$ISX_SCRIPTS" | while IFS= read -r s; do
  [ -z "$s" ] && continue
  echo "running the package's install script: $s"
  (cd "$pkgdir" && PATH="$ISX_DEST/node_modules/.bin:$PATH" sh -c "$s")
done
printf '%s\\n' "$ISX_BINS" | while IFS='=' read -r name rel; do
  [ -z "$name" ] && continue
  chmod +x "$pkgdir/$rel"
  ln -sf "$pkgdir/$rel" "/usr/local/bin/$name"
done
`;

/** A stalled mirror connection fails and is retried instead of hanging the build. */
const APT_OPTS = "-o Acquire::http::Timeout=30 -o Acquire::Retries=3";

let counter = 0;

async function stage(ctx: StepContext, data: Uint8Array | string, base: string): Promise<string> {
  const path = `${STAGING}/${++counter}-${base}`;
  await ctx.client.pushFile(ctx.instance, path, data, { step: `push ${base}`, mode: 0o600 });
  return path;
}

async function script(
  ctx: StepContext,
  text: string,
  opts: { user?: GuestUser; env?: Record<string, string>; label: string },
): Promise<void> {
  const user = opts.user ?? ROOT;
  const last: string[] = []; // the failure message quotes the output's last lines
  const code = await runScript(ctx.client, ctx.instance, text, {
    user,
    ...(opts.env ? { env: opts.env } : {}),
    onLine: (line) => {
      if (line.trim()) last.push(line.trim());
      if (last.length > 3) last.shift();
      ctx.onOutput(line);
    },
  });
  if (code !== 0) {
    const tail = last.length ? `: ${last.join(" | ")}` : "";
    throw new IsbError("operation_failed", `step "${opts.label}" exited with ${code}${tail}`);
  }
}

async function apt(ctx: StepContext, packages: string[], label: string): Promise<void> {
  // apt-get update exits 0 when it fetched nothing (a mirror or the bridge's dnsmasq briefly
  // away, as right after a raw.dnsmasq change restarts it): --error-on=any makes that a failure,
  // tried three times, so no build goes on with empty lists ("Unable to locate package")
  await script(
    ctx,
    `for i in 1 2 3; do apt-get update -q --error-on=any ${APT_OPTS} && exit 0; sleep 3; done; exit 1`,
    { label: "apt-get update" },
  );
  const uris = await capture(ctx.client, ctx.instance, [
    "apt-get",
    "install",
    "-y",
    "-qq",
    "--no-install-recommends",
    "--print-uris",
    ...APT_OPTS.split(" "),
    ...packages,
  ], { step: "list packages to download" });
  let debs = parsePrintUris(uris);
  const fetchArgs = downloadArgs(debs);
  if (fetchArgs.length) {
    // install --print-uris gives MD5 or no hash on Debian 12; download --print-uris SHA-256
    const out = await capture(ctx.client, ctx.instance, [
      "apt-get",
      "download",
      "-qq",
      "--print-uris",
      ...fetchArgs,
    ], { step: "list package hashes" }).catch(() => "");
    debs = withHashes(debs, out);
  }
  const dir = aptCacheDir(ctx.cacheDir);
  Deno.mkdirSync(dir, { recursive: true });
  const missing: DebEntry[] = [];
  for (const deb of debs) {
    const data = await readCachedDeb(dir, deb); // checked against apt's SHA-256
    if (!data) {
      missing.push(deb);
      continue;
    }
    await ctx.client.pushFile(ctx.instance, `/var/cache/apt/archives/${deb.name}`, data, {
      step: `push cached ${deb.name}`,
      mode: 0o644,
    });
  }
  if (debs.length) {
    ctx.host.log(
      `apt: ${debs.length - missing.length} of ${debs.length} packages from the host cache`,
    );
  }
  const install = `apt-get install -y -q --no-install-recommends ${APT_OPTS} "$@"`;
  const code = await runScript(ctx.client, ctx.instance, install, {
    onLine: ctx.onOutput,
    args: packages,
  });
  if (code !== 0) throw new IsbError("operation_failed", `step "${label}" exited with ${code}`);
  for (const deb of missing) {
    if (!deb.sha256) continue; // nothing to check a later push against: not cached
    let pulled;
    try {
      pulled = await ctx.client.pullFile(ctx.instance, `/var/cache/apt/archives/${deb.name}`);
    } catch {
      continue; // apt may name a file differently than it printed; caching is best effort
    }
    await storeDeb(dir, deb, pulled.data);
  }
}

async function npm(ctx: StepContext, step: Extract<Step, { kind: "npm" }>): Promise<void> {
  const art = await fetchNpm(ctx.cacheDir, {
    pkg: step.pkg,
    version: step.version,
    install: step.install,
  }, ctx.host);
  ctx.host.log(`${step.pkg}@${art.version}${art.hit ? " (cached on the host)" : ""}`);
  const tarball = await stage(ctx, Deno.readFileSync(art.file), art.file.split("/").pop()!);
  const bins = Object.entries(art.bins).filter(([n, p]) =>
    /^[A-Za-z0-9._-]+$/.test(n) && !/[=\n]/.test(p)
  );
  await script(ctx, NPM_UNPACK, {
    label: step.label,
    env: {
      ISX_TARBALL: tarball,
      ISX_DEST: `/opt/isx/npm/${step.pkg.replace("/", "+")}`,
      ISX_PACKED: art.install ? "0" : "1",
      ISX_PKGDIR: art.install ? `node_modules/${step.pkg}` : ".",
      ISX_SCRIPTS: art.install ? art.scripts.join("\n") : "",
      ISX_BINS: bins.map(([n, p]) => `${n}=${p.replace(/^\.\//, "")}`).join("\n"),
    },
  });
}

async function program(ctx: StepContext, label: string): Promise<void> {
  if (!ctx.program) throw new IsbError("invalid", `step "${label}": no program source given`);
  const bundle = await bundleProgram(ctx.cacheDir, ctx.program, ctx.host);
  await script(ctx, "install -d -m 0755 /usr/local/lib/isx", { label });
  const push = (path: string, data: Uint8Array | string, mode: number) =>
    ctx.client.pushFile(ctx.instance, path, data, { step: `push ${path}`, mode, uid: 0, gid: 0 });
  await push(GUEST_PROGRAM.bundle, Deno.readFileSync(bundle), 0o644);
  await push(GUEST_PROGRAM.deno, Deno.readFileSync(ctx.program.execPath), 0o755);
  await push(GUEST_PROGRAM.launcher, launcherText(ctx.program.flags), 0o755);
}

async function file(ctx: StepContext, step: Extract<Step, { kind: "file" }>): Promise<void> {
  const f = step.file;
  const src = await stage(ctx, f.data, "file");
  const owner = f.owner === "agentuser" ? AGENT_USER : "root";
  await capture(ctx.client, ctx.instance, [
    "sh",
    "-c",
    'install -D -m "$1" -o "$2" -g "$2" "$3" "$4" && rm -f "$3"',
    "sh",
    "0" + f.mode.toString(8),
    owner,
    src,
    f.path,
  ], { step: step.label });
}

/** Runs one step. */
export async function runStep(ctx: StepContext, step: Step): Promise<void> {
  switch (step.kind) {
    case "apt":
      return await apt(ctx, step.packages, step.label);
    case "npm":
      return await npm(ctx, step);
    case "program":
      return await program(ctx, step.label);
    case "file":
      return await file(ctx, step);
    case "script": {
      const user = step.user === "agentuser" ? ctx.agent : ROOT;
      if (!user) {
        throw new IsbError("invalid", `step "${step.label}": ${AGENT_USER} does not exist yet`);
      }
      return await script(ctx, step.script, { user, env: step.env, label: step.label });
    }
  }
}
