// deno-lint-ignore-file no-console -- a script that tells its user what it did
/**
 * Writes the pre-built program: one code-split bundle (`deno bundle --code-splitting`) of
 * main.ts's pre-built entry (`cli/prebuilt_main.ts`) and of every module the program imports by
 * a computed specifier (each command, `LAZY_MODULES`, rpc's method table), under
 * `<root>/.prebuilt/<version>/`, laid out as the sources are. `bin/launcher.bash` runs it in
 * place of main.ts while no source is newer than it: a start then loads a handful of files
 * instead of a few hundred modules (`docs/decisions.md`, "The pre-built program", has the
 * figures). The code is the program's own, joined; npm packages stay imports (`--packages
 * external`), resolved at run time through deno.json and the lockfile as from the sources.
 *
 * What the launcher checks is `<version>/inputs`: every source the bundle could hold (the
 * program's directories less tests, main.ts, deno.json, deno.lock and this script), one path per line, with
 * the mtime of the moment this build started read them, so an edit made while it ran leaves it
 * stale. `<root>/.prebuilt/current` names the newest version (written last, by a rename). A
 * version is removed by the second build after it stopped being current, unless a running
 * process's command line names it (a long-lived `isx mcp` keeps importing from its own). One build at a time: the lock is
 * `.prebuilt/.lock`, a directory, taken over once it is ten minutes old (its build died).
 *
 * The launcher starts it in the background when the pre-built program is missing or stale and
 * the checkout is the user's; `scripts/demo.sh` and `scripts/test.sh` run it in the foreground
 * first. `--if-stale` builds only when needed (exit 0 either way); a build under way is waited
 * for, except with `--background` (the launcher's), which then leaves. Run by hand:
 * `deno run --allow-read --allow-write=.prebuilt --allow-run --allow-env scripts/prebuild.ts`.
 *
 * @module
 */

import { COMMANDS, LAZY_MODULES } from "../cli/commands.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const DIR = `${ROOT}/.prebuilt`;
/** The program's directories: whatever the bundle can hold comes from these (less tests). */
const SOURCE_DIRS = ["cli", "mcp", "rpc", "proxy", "guest"];
/** Besides the sources: the import map and lockfile, and this script (how the bundle is made). */
const SOURCE_FILES = ["main.ts", "deno.json", "deno.lock", "scripts/prebuild.ts"];
const LOCK_STALE_MS = 10 * 60_000;

/** The bundle's entry points, from the root: what the program imports by computed specifier. */
export function entryPoints(): string[] {
  const cli = [...COMMANDS.map((c) => c.module), ...LAZY_MODULES]
    .map((m) => new URL(`cli/${m}`, "file:///").pathname.slice(1));
  return [...new Set(["cli/prebuilt_main.ts", "rpc/server/methods/mod.ts", ...cli])].sort();
}

/** Every file a bundle could hold (tests left out), from the root, sorted. */
export async function sourceInputs(root = ROOT): Promise<string[]> {
  const out: string[] = [...SOURCE_FILES];
  async function walk(rel: string): Promise<void> {
    for await (const e of Deno.readDir(`${root}/${rel}`)) {
      const path = `${rel}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.isFile && !/_test\.ts$/.test(e.name)) out.push(path);
    }
  }
  for (const d of SOURCE_DIRS) await walk(d);
  return out.sort();
}

/** The version the launcher runs (`current`), if any. */
async function current(): Promise<string | undefined> {
  try {
    return (await Deno.readTextFile(`${DIR}/current`)).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** True when `version` exists and no input is newer than its `inputs` (the launcher's test). */
export async function isFresh(version: string | undefined, root = ROOT): Promise<boolean> {
  if (!version) return false;
  let stamp: Deno.FileInfo, listed: string[];
  try {
    stamp = await Deno.stat(`${root}/.prebuilt/${version}/inputs`);
    listed = (await Deno.readTextFile(`${root}/.prebuilt/${version}/inputs`)).split("\n");
  } catch {
    return false;
  }
  const built = stamp.mtime!.getTime();
  for (const path of [...listed.filter((l) => l !== ""), Deno.execPath()]) {
    const at = path.startsWith("/") ? path : `${root}/${path}`;
    const m = (await Deno.stat(at).catch(() => undefined))?.mtime?.getTime();
    if (m !== undefined && m > built) return false;
  }
  return true;
}

/** Takes the build lock; false when another build holds a recent one. */
async function lock(): Promise<boolean> {
  await Deno.mkdir(DIR, { recursive: true, mode: 0o755 });
  const at = `${DIR}/.lock`;
  for (let i = 0; i < 2; i++) {
    try {
      await Deno.mkdir(at);
      return true;
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const age = Date.now() -
        ((await Deno.stat(at).catch(() => undefined))?.mtime?.getTime() ?? 0);
      if (age < LOCK_STALE_MS) return false;
      await Deno.remove(at, { recursive: true }).catch(() => {}); // left by a build that died
    }
  }
  return false;
}

/** The versions some running process was started from (its command line names it). */
async function versionsInUse(): Promise<Set<string>> {
  const used = new Set<string>();
  const marker = `${DIR}/`;
  try {
    for await (const e of Deno.readDir("/proc")) {
      if (!/^\d+$/.test(e.name)) continue;
      const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
      for (const arg of cmd.split("\0")) {
        if (arg.startsWith(marker)) used.add(arg.slice(marker.length).split("/")[0]!);
      }
    }
  } catch { /* no /proc: keep none but current */ }
  return used;
}

/**
 * Removes every version that is not in `keep` and not in use. The one `current` named until
 * this build is kept too: a launcher may have read its name just before the switch and not
 * yet started the process whose command line would name it.
 */
async function prune(keep: string[]): Promise<void> {
  const used = await versionsInUse();
  for await (const e of Deno.readDir(DIR)) {
    if (!e.isDirectory || !/^v\d+-\d+$/.test(e.name) && !/^tmp-\d+$/.test(e.name)) continue;
    if (keep.includes(e.name) || used.has(e.name)) continue;
    if (e.name.startsWith("tmp-") && e.name !== `tmp-${Deno.pid}`) {
      // another build's work in progress, unless that build is gone
      const pid = e.name.slice(4);
      if (await Deno.stat(`/proc/${pid}`).then(() => true, () => false)) continue;
    }
    await Deno.remove(`${DIR}/${e.name}`, { recursive: true }).catch(() => {});
  }
}

/** Builds a new version and makes it current. */
async function build(): Promise<string> {
  const started = new Date(); // before any read: a file written after it is newer than the build
  const inputs = await sourceInputs();
  const tmp = `${DIR}/tmp-${Deno.pid}`;
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      "--code-splitting",
      "--packages",
      "external",
      "--minify",
      "--no-remote", // and npm packages stay imports: nothing to fetch, nothing reached
      "--frozen-lockfile",
      "--config",
      `${ROOT}/deno.json`,
      "--outdir",
      tmp,
      ...entryPoints(),
    ],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw new Error(`deno bundle failed: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  // the layout the entry and rpc/prebuilt.ts rely on: outputs where their sources are
  for (const e of entryPoints()) {
    await Deno.stat(`${tmp}/${e.replace(/\.ts$/, ".js")}`).catch(() => {
      throw new Error(`deno bundle wrote no ${e.replace(/\.ts$/, ".js")} (layout changed?)`);
    });
  }
  await Deno.writeTextFile(`${tmp}/inputs`, inputs.join("\n") + "\n");
  await Deno.utime(`${tmp}/inputs`, started, started);
  const version = `v${started.getTime()}-${Deno.pid}`;
  await Deno.rename(tmp, `${DIR}/${version}`);
  await Deno.writeTextFile(`${DIR}/current.${Deno.pid}`, `${version}\n`);
  await Deno.rename(`${DIR}/current.${Deno.pid}`, `${DIR}/current`);
  return version;
}

if (import.meta.main) {
  const ifStale = Deno.args.includes("--if-stale");
  const quiet = Deno.args.includes("--quiet");
  const background = Deno.args.includes("--background");
  if (ifStale && await isFresh(await current())) {
    if (!quiet) console.log(`prebuild: ${DIR}/${await current()} is fresh`);
    Deno.exit(0);
  }
  // another build under way: the launcher's background one leaves it be; a foreground one
  // waits for it and then builds only if it is still needed
  while (!await lock()) {
    if (background) Deno.exit(0);
    await new Promise((r) => setTimeout(r, 200));
    if (ifStale && await isFresh(await current())) Deno.exit(0);
  }
  try {
    const t0 = performance.now();
    const before = await current();
    const version = await build();
    await prune(before ? [version, before] : [version]);
    if (!quiet) {
      console.log(`prebuild: ${DIR}/${version} (${Math.round(performance.now() - t0)} ms)`);
    }
  } catch (e) {
    console.error(`prebuild: ${e instanceof Error ? e.message : String(e)}`);
    Deno.exit(1);
  } finally {
    await Deno.remove(`${DIR}/.lock`, { recursive: true }).catch(() => {});
  }
}
